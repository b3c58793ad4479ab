"""`piwatch completion SHELL`: the shell code that completes piwatch's
commands and options (argcomplete: the parser itself answers, so completion
never drifts from the options)."""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run", "SHELLS"]

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "completion",
        help='print shell completion code (bash: eval "$(piwatch completion bash)" in ~/.bashrc)',
        description='Print the completion code for SHELL. bash/zsh: add `eval "$(piwatch completion bash)"` '
        "(or zsh) to your shell's rc file; fish: `piwatch completion fish > ~/.config/fish/completions/piwatch.fish`.",
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    import argcomplete  # lazy: only completion needs it

    print(argcomplete.shellcode(["piwatch"], shell=ns.shell), end="")
    return 0
