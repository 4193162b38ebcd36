package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// The completion scripts ask the binary itself for the words that may
// follow (`raftmq topic --generate-bash-completion` lists topic's
// subcommands, `raftmq produce - --generate-bash-completion` its flags).
const bashCompletion = `# bash completion for raftmq: source <(raftmq completion bash)
_raftmq_complete() {
  local cur words
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:$COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _raftmq_complete raftmq
`

const zshCompletion = `#compdef raftmq
# zsh completion for raftmq: source <(raftmq completion zsh)
_raftmq() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _raftmq raftmq
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "Load it in the running shell or save it where the shell looks:\n" +
			"  source <(raftmq completion bash)      # or > /etc/bash_completion.d/raftmq\n" +
			"  source <(raftmq completion zsh)\n" +
			"  raftmq completion fish > ~/.config/fish/completions/raftmq.fish",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, "completion needs one shell: bash, zsh or fish")
			}
			switch sh := c.Args().First(); sh {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				fmt.Fprint(c.App.Writer, s)
			default:
				return usageError(c, "completion: unknown shell %q (bash, zsh or fish)", sh)
			}
			return nil
		},
	}
}
