#!/usr/bin/env python3
"""The README's code blocks, for scripts/first-hour.sh, which runs them as a newcomer would.

  readme-blocks.py README --commands HEADING N     the Nth `sh` block under "## HEADING", one
                                                  command a line, comments and blank lines dropped
  readme-blocks.py README --commented HEADING N    the same block as written
  readme-blocks.py README --rust HEADING           the first `rust` block under HEADING
  readme-blocks.py README --compare [--exact] OUTPUT HEADING N
      the `text` block that follows the Nth `sh` block under HEADING against the file OUTPUT,
      both masked (paths, times, devices, the filesystem and mount options): each line of the
      block must be a line of OUTPUT, in order (--exact: the lines must be OUTPUT's lines); exit
      1 with both shown when not

A machine's paths, times, devices and mounts are its own; what the README promises is the rest.
"""
import re
import sys


def sections(readme):
    """{heading: [(lang, [lines])]}, the fenced blocks of each `## ` section in order."""
    found, heading, block, lang = {}, None, None, None
    for line in open(readme, encoding="utf-8").read().splitlines():
        if block is None and line.startswith("## "):
            heading = line[3:].strip()
            found.setdefault(heading, [])
        elif block is None and line.startswith("```"):
            lang, block = line[3:].strip(), []
        elif block is not None and line.startswith("```"):
            found.setdefault(heading, []).append((lang, block))
            block = None
        elif block is not None:
            block.append(line)
    return found


def sh_block(blocks, heading, n):
    """The index in blocks[heading] of its Nth `sh` block (1-based)."""
    indices = [i for i, (lang, _) in enumerate(blocks.get(heading, [])) if lang == "sh"]
    if len(indices) < n:
        sys.exit(f"readme-blocks: no sh block {n} under '## {heading}'")
    return indices[n - 1]


def mask(line):
    line = re.sub(r"; \S+ on \S+ \([^)]*\)", "; FS on DEVICE (OPTIONS)", line)
    line = re.sub(r"/dev/\S+", "DEVICE", line)
    line = re.sub(r"(?<![\w.~])(?:~|\.\.?)?/(?:[\w.+%@:-]+/?)+", "PATH", line)
    line = re.sub(r"\b\d+(?:\.\d+)? ?s\b", "TIME", line)
    return line.rstrip()


def compare(output, expected, exact):
    got = [mask(l) for l in open(output, encoding="utf-8", errors="replace").read().splitlines()]
    want = [mask(l) for l in expected]
    if exact:
        ok = got == want
    else:
        rest = iter(got)
        ok = all(any(w == g for g in rest) for w in want)
    if not ok:
        print("readme-blocks: the README shows:", *want, "but the command printed:", *got,
              sep="\n", file=sys.stderr)
        sys.exit(1)


def main(argv):
    readme, what, *rest = argv
    blocks = sections(readme)
    if what in ("--commands", "--commented"):
        heading, n = rest[0], int(rest[1])
        lines = blocks[heading][sh_block(blocks, heading, n)][1]
        if what == "--commands":
            lines = [l.split(" #")[0].strip() for l in lines]
            lines = [l for l in lines if l and not l.startswith("#")]
        print("\n".join(lines))
    elif what == "--rust":
        rust = [b for lang, b in blocks.get(rest[0], []) if lang.split(",")[0] == "rust"]
        if not rust:
            sys.exit(f"readme-blocks: no rust block under '## {rest[0]}'")
        print("\n".join(rust[0]))
    elif what == "--compare":
        exact = rest[0] == "--exact"
        output, heading, n = rest[1:] if exact else rest
        i = sh_block(blocks, heading, int(n))
        following = blocks[heading][i + 1] if i + 1 < len(blocks[heading]) else (None, [])
        if following[0] != "text":
            sys.exit(f"readme-blocks: sh block {n} under '## {heading}' has no text block after it")
        compare(output, following[1], exact)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
