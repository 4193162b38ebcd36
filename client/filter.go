package client

// Filter types of a pull (api.PullRequest.filter_type).
const (
	FilterTag = "TAG"
	FilterSQL = "SQL92"
)

// filter is the pull's filter type and expression from the config.
func (cn *Consumer) filter() (string, string) {
	if cn.cfg.SQL != "" {
		return FilterSQL, cn.cfg.SQL
	}
	return FilterTag, cn.cfg.Tags
}

// Filtered counts the messages the broker skipped for this consumer because
// they did not match its Tags or SQL filter.
func (cn *Consumer) Filtered() int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.filtered
}
