#!/usr/bin/env python3
"""The two command-line synopses (README.md's "Command line" and
docs/cli.md's "Synopsis") against the programs' own --help:

  * every command and subcommand the program has (`tessera --help`, then
    `tessera CMD --help` down the tree) is named in both synopses;
  * every command, subcommand and option a synopsis writes exists (an option
    of that command or of the program), and every value it lists for an
    option or argument with a fixed set of values is one of that set;
  * every option of every command outside `bench` is named somewhere in
    docs/*.md (by one of its names); the benchmarks' options are their
    --help's (docs/benchmarks.md describes the benchmarks);
  * README.md, the front door, stays within README_LINES lines (the
    synopsis grows with the program: the details belong in docs/).

A synopsis entry starts at a line beginning with `tessera`; lines indented
less than DESCRIPTION_INDENT continue its usage, deeper ones (and the text
after three spaces) describe it. A group's subcommands are written `a|b|c`,
`a | b [options] | c`, or as a placeholder (`bench NAME`) whose description
lists them.

Usage: check_cli_reference.py SOURCE_DIR BUILD_DIR"""
import re
import subprocess
import sys
from pathlib import Path

DESCRIPTION_INDENT = 30
README_LINES = 200
SYNOPSES = [("README.md", "## Command line"), ("docs/cli.md", "## Synopsis")]
PROGRAMS = ("tessera", "tessera-analyze")


class Help:
    """What `PROGRAM [COMMAND...] --help` prints: option names (with their
    fixed value sets, if any), positional value sets, subcommands."""

    def __init__(self, text):
        self.options = {}      # "--name" / "-x" -> set of allowed values or None
        self.positionals = []  # value sets of positionals with a fixed set
        self.subcommands = []
        self.option_names = []  # each option's names: ("-o", "--output")
        section = None
        for line in text.splitlines():
            if re.fullmatch(r"(Options|Positionals|Subcommands):", line):
                section = line[:-1].lower()
                continue
            m = re.match(r"^  (\S.*)$", line)  # an item; wrapped descriptions are indented deeper
            if not m or section is None:
                continue
            item = m.group(1)
            first = item.split()[0]
            values = re.search(r":\{([^}]*)\}", item)
            choices = set(values.group(1).split(",")) if values else None
            if section == "options":
                names = tuple(name for name in first.split(",") if name.startswith("-"))
                self.option_names.append(names)
                for name in names:
                    self.options[name] = choices
            elif section == "positionals":
                if choices:
                    self.positionals.append(choices)
            elif section == "subcommands":
                self.subcommands.append(first)


def help_of(build, argv):
    p = subprocess.run([str(build / argv[0]), *argv[1:], "--help"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} --help exited {p.returncode}: {p.stderr.strip()}")
    return Help(p.stdout)


def command_tree(build):
    """{(program, command, subcommand...): Help} for every command."""
    tree = {}
    pending = [(program,) for program in PROGRAMS]
    while pending:
        path = pending.pop()
        tree[path] = help_of(build, list(path))
        pending += [path + (sub,) for sub in tree[path].subcommands]
    return tree


def synopsis(text, heading):
    """[(line number, usage text, description text)] of the first code block
    under the heading."""
    lines = text.splitlines()
    start = lines.index(heading)
    begin = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].startswith("```"))
    entries = []
    for number in range(begin + 1, end):
        line = lines[number]
        if not line.strip():
            if entries:
                entries[-1][3] = True  # a blank line ends the entry: what follows is prose
            continue
        indent = len(line) - len(line.lstrip())
        usage, _, description = line.strip().partition("   ")
        if indent >= DESCRIPTION_INDENT:
            usage, description = "", line.strip()
        if indent == 0 and re.match(r"tessera(-analyze)?\b", line):
            entries.append([number + 1, usage, description, False])
        elif entries and not entries[-1][3]:
            entries[-1][1] += " " + usage
            entries[-1][2] += " " + description
    return [(number, usage, description) for number, usage, description, _ in entries]


def commands_of(tree, where, usage, description, named):
    """The command an entry is about (or the program, for its own options),
    the subcommands it lists, the words after them and the problems; adds
    the commands it names to `named`."""
    words = re.findall(r"[^\s\[\]]+", usage)
    program, words = (words[0],), words[1:]
    if words[:1] == ["-n"]:
        words = words[2:]
    if not words or words[0].startswith("-"):  # an option of the program itself: --colocales, --version
        return program, [], words, []
    command = program + (words[0],)
    if command not in tree:
        return command, [], [], [f"{where}: `{' '.join(command)}`: no such command "
                                  f"(it has: {', '.join(tree[program].subcommands)})"]
    named.add(command)
    subs, rest = tree[command].subcommands, words[1:]
    if not subs:
        return command, [], rest, []
    if not rest:
        return command, [], [], [f"{where}: `{' '.join(command)}` names none of its subcommands"]
    listed = rest[0].split("|")
    if re.fullmatch(r"[A-Z]+", rest[0]):  # a placeholder: the description lists them
        listed = [w for w in re.findall(r"[\w-]+", description) if w in subs]
    rest = rest[1:]
    # `a [options] | b [options]` (not `[--x X | --y Y]`, a choice of options)
    bars = [i for i, w in enumerate(rest[:-1]) if w == "|" and not rest[i + 1].startswith("-")]
    listed += [rest[i + 1] for i in bars]
    rest = [w for i, w in enumerate(rest) if i not in bars and i - 1 not in bars]
    problems = [f"{where}: `{' '.join(command + (sub,))}`: no such subcommand (it has: {', '.join(subs)})"
                for sub in listed if command + (sub,) not in tree]
    listed = [sub for sub in listed if command + (sub,) in tree]
    named.update(command + (sub,) for sub in listed)
    return command, listed, rest, problems


def option_problems(tree, where, command, listed, rest):
    """Options the entry writes that its command (its listed subcommands, the
    program) lacks, and values outside an option's or argument's fixed set."""
    scopes = [command] + [command + (sub,) for sub in listed]
    options = {}
    for s in scopes + [command[:1]]:
        for name, values in tree[s].options.items():
            options.setdefault(name, values)
    positionals = sum((tree[s].positionals for s in scopes), [])
    option = re.compile(r"--?[A-Za-z][\w-]*")
    problems = []
    for i, word in enumerate(rest):
        name = word.split("=")[0].rstrip(",")
        value = rest[i + 1] if i + 1 < len(rest) else ""
        after_option = i > 0 and option.fullmatch(rest[i - 1].split("=")[0])
        if option.fullmatch(name):
            if name not in options:
                problems.append(f"{where}: `{name}` is not an option of `{' '.join(command)}`")
            elif options[name] and "|" in value and not value.startswith("-"):
                stale = [v for v in value.split("|") if v not in options[name]]
                if stale:
                    problems.append(f"{where}: `{name}` has no value {', '.join(stale)} "
                                    f"(it takes {', '.join(sorted(options[name]))})")
        elif "|" in word.strip("|") and not after_option and positionals:
            if not any(set(word.split("|")) <= values for values in positionals):
                problems.append(f"{where}: `{word}`: not among the values of `{' '.join(command)}`'s arguments")
    return problems


def check_entry(tree, where, usage, description, named):
    """The problems of one entry; adds the commands it names to `named`."""
    command, listed, rest, problems = commands_of(tree, where, usage, description, named)
    if command not in tree:
        return problems
    return problems + option_problems(tree, where, command, listed, rest)


def main():
    source, build = Path(sys.argv[1]), Path(sys.argv[2])
    tree = command_tree(build)
    every = {path for path in tree if len(path) > 1}
    problems = []
    for page, heading in SYNOPSES:
        named = set()
        entries = synopsis((source / page).read_text(), heading)
        for number, usage, description in entries:
            problems += check_entry(tree, f"{page}:{number}", usage, description, named)
        missing = sorted(" ".join(path) for path in every - named)
        if missing:
            problems.append(f"{page}: the synopsis lacks {', '.join(missing)}")
        print(f"{page}: {len(entries)} synopsis entries, {len(named)} of {len(every)} commands named")
    docs = "".join(page.read_text() for page in sorted((source / "docs").glob("*.md")))
    for path, help in sorted(tree.items()):
        if path[1:2] == ("bench",):
            continue
        for names in help.option_names:
            if names != ("-h", "--help") and not any(re.search(re.escape(n) + r"(?![\w-])", docs) for n in names):
                problems.append(f"docs/*.md never name `{' '.join(path)} {names[-1]}`")
    lines = len((source / "README.md").read_text().splitlines())
    if lines > README_LINES:
        problems.append(f"README.md has {lines} lines, more than {README_LINES}: move details to docs/")
    for p in problems:
        print("FAIL " + p)
    if problems:
        sys.exit(1)
    print("PASS: both synopses name every command, and only commands, options and values the programs have")


main()
