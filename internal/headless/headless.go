// Package headless drives a headless Chromium through the DevTools
// protocol over a pipe (--remote-debugging-pipe): open a page, evaluate
// JavaScript in it, take a screenshot. It is the test kit's browser for the
// web console; it needs only the chromium binary and no Go dependency.
//
// It is never imported by production code.
package headless

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Find returns the path of a Chromium: $RAFTMQ_CHROMIUM, else chromium,
// chromium-browser or google-chrome on PATH.
func Find() (string, error) {
	for _, name := range []string{os.Getenv("RAFTMQ_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH (apt-get install -y chromium, or set RAFTMQ_CHROMIUM)")
}

// Browser is one running headless Chromium. Its methods may be called from
// any goroutine.
type Browser struct {
	cmd  *exec.Cmd
	w    *os.File // the browser's fd 3: our messages to it
	r    *os.File // the browser's fd 4: its messages to us
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu      sync.Mutex
	next    int
	pending map[int]chan message
	err     error // why the reader stopped
}

type message struct {
	ID     int             `json:"id"`
	Method string          `json:"method,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Start starts bin headless with its profile in dir (a temporary
// directory); stderr, when set, receives the browser's own log.
func Start(bin, dir string, stderr *bytes.Buffer) (*Browser, error) {
	cr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pr, cw, err := os.Pipe()
	if err != nil {
		cr.Close()
		pw.Close()
		return nil, err
	}
	cmd := exec.Command(bin, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe", "--user-data-dir="+dir, "about:blank")
	cmd.ExtraFiles = []*os.File{cr, cw}                   // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close kills its helper processes with it
	if stderr != nil {
		cmd.Stderr = stderr
	}
	// Chromium's crash handler runs in a session of its own, out of reach
	// of Close's process-group kill, and inherits stderr: Wait must not wait
	// for it to close that pipe.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cr.Close()
		pw.Close()
		pr.Close()
		cw.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	cr.Close()
	cw.Close()
	b := &Browser{cmd: cmd, w: pw, r: pr, done: make(chan struct{}), pending: map[int]chan message{}}
	b.wg.Add(1)
	go b.read()
	return b, nil
}

// read delivers the browser's answers to their callers; events are dropped.
func (b *Browser) read() {
	defer b.wg.Done()
	br := bufio.NewReaderSize(b.r, 1<<20)
	var err error
	for {
		var raw []byte
		raw, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil || m.ID == 0 {
			continue
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	b.mu.Lock()
	b.err = fmt.Errorf("browser pipe closed: %w", err)
	b.mu.Unlock()
	close(b.done)
}

// call sends one command (to a page when session is set) and decodes its
// result into out.
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return err
	}
	b.next++
	id := b.next
	ch := make(chan message, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	req := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		req["sessionId"] = session
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := b.w.Write(append(body, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: browser exited", method)
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Page is one open tab.
type Page struct {
	b       *Browser
	session string
}

// Open opens url in a new tab of width x height CSS pixels.
func (b *Browser) Open(ctx context.Context, url string, width, height int) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return nil, err
	}
	var a struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &a); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: a.SessionID}
	if err := b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	if err := b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// (JSON-serialisable) into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluate %q: %s", expr, r.Exception.Text)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Screenshot is a PNG of the page's viewport.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// Close stops the browser and its helper processes and waits for them. It
// is idempotent.
func (b *Browser) Close() error {
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		b.call(ctx, "", "Browser.close", map[string]any{}, nil)
		cancel()
		select {
		case <-b.done:
		case <-time.After(2 * time.Second):
		}
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL) // its own process group: the browser and its helpers only
		b.w.Close()
		b.cmd.Wait()
		b.r.Close()
		b.wg.Wait()
	})
	return nil
}
