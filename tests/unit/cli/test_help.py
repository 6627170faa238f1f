"""Every command's --help is complete: a description, and every option with its help text."""

from __future__ import annotations

import pytest

from moesweep.cli import COMMANDS, build_parser


def subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return parser, action.choices


def test_top_level_help_lists_every_command(capsys):
    parser, subs = subparsers()
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name.replace("_", "-") in out and name.replace("_", "-") in subs


@pytest.mark.parametrize("name", [c.replace("_", "-") for c in COMMANDS])
def test_each_command_documents_every_option(name):
    _parser, subs = subparsers()
    sub = subs[name]
    assert sub.description or sub.format_help().strip()
    for action in sub._actions:
        if action.option_strings and action.dest not in ("help",):
            assert action.help, (name, action.option_strings)
    nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
    for group in nested:
        for child_name, child in group.choices.items():
            for action in child._actions:
                if action.option_strings and action.dest != "help":
                    assert action.help, (name, child_name, action.option_strings)
