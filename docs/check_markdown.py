#!/usr/bin/env python3
"""Checks the repository's markdown as GitHub renders it; run by `docs/build`.

    python3 docs/check_markdown.py ROOT      check every *.md under ROOT
    python3 docs/check_markdown.py --self-test

Four checks, each of which a reader would otherwise meet as a dead end:

- Every relative link (inline `[text](target)`, outside code) names a file or
  directory inside ROOT.
- Every `#anchor` of a relative link to a markdown file (`#x` in the same
  file, `page.md#x` in another) names a heading of that file, by GitHub's
  slug rules (below), or an explicit `<a id="x">`. A page that is only an
  mdbook `{{#include ...}}` stub has the headings of what it includes.
- Every fenced code block closes, and no line inside one looks like its
  closing fence with text after it: a closing fence takes no text, so
  "``` More prose" leaves the block open and everything after it renders as
  code (lesson 05's README once lost 290 lines so).
- Every GPU run a page outside `runs/` names by number ("call 39", "calls 17
  to 19", "calls 86 and 92"; outside code) has its log directory,
  `runs/<date>/call39`: a claim must keep its evidence. Pruning `runs/` by
  links alone once dropped six directories that pages named only in text.
  `runs/README.md`, the index, also names staging calls that left no log,
  so pages under `runs/` are not held to this.

GitHub's slug of a heading: its rendered text, lowercased; every character
that is not a letter, mark, digit, connector (`_`) or `-` or a space dropped;
each space turned into `-`; a repeated slug gets `-1`, `-2`, ... mdbook's ids
follow the same rules for the headings this book has.

What it does not read: reference-style links (`[text][ref]`), HTML links,
and setext headings (underlined with `===`); the repository uses none of
them. Indented code blocks are read as text.

Exit status 1 when anything is broken, with one line per problem on stderr.
"""

import os
import re
import sys
import unicodedata
import urllib.parse

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
LINK = re.compile(r"\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HTML_ID = re.compile(r"<a\s[^>]*\b(?:id|name)=\"([^\"]+)\"")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")
RUN_REF = re.compile(r"\b[Cc]alls? (\d+[a-c]?(?:(?:, and |, | and | to )\d+[a-c]?)*)\b")


def slug(heading):
    """GitHub's anchor for a heading's markdown text."""
    parts = []
    # Outside code spans, the rendered text drops links' targets and HTML
    # tags; inside them, the text is literal.
    for index, piece in enumerate(CODE_SPAN.split(heading)):
        kind = index % 3  # split yields text, the backticks, the span's text
        if kind == 1:
            continue
        if kind == 0:
            piece = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", piece)
            piece = re.sub(r"<[^>]+>", "", piece)
        parts.append(piece)
    text = "".join(parts).strip().lower()
    kept = []
    for char in text:
        if char == " ":
            kept.append("-")
        elif char == "-" or unicodedata.category(char)[0] in "LMN" or unicodedata.category(char) == "Pc":
            kept.append(char)
    return "".join(kept)


class Page:
    """One markdown file, read as GitHub renders it."""

    def __init__(self, path):
        self.path = path
        self.links = []  # (line number, target)
        self.anchors = set()
        self.includes = []
        self.runs = []  # (line number, run named by number, as "39" or "8b")
        self.problems = []  # (line number, message)
        seen = {}
        fence = None  # (fence characters, line number it opened at)
        paragraph, paragraph_line = [], 0

        def flush():
            nonlocal paragraph
            text = CODE_SPAN.sub("", " ".join(paragraph))
            for match in LINK.finditer(text):
                self.links.append((paragraph_line, match.group(1)))
            for match in RUN_REF.finditer(text):
                self.runs += [(paragraph_line, run) for run in re.findall(r"\d+[a-c]?", match.group(1))]
            paragraph = []

        with open(path, encoding="utf-8") as file:
            lines = file.read().split("\n")
        for number, line in enumerate(lines, 1):
            match = FENCE.match(line)
            if fence:
                opened, opened_at = fence
                if match and match.group(1)[0] == opened[0] and len(match.group(1)) >= len(opened):
                    if not match.group(2).strip():
                        fence = None
                    else:
                        self.problems.append((number, f"this line looks like the closing fence of the code block opened at line {opened_at}, but a closing fence takes no text after it, so the block stays open"))
                continue
            if match:
                info = match.group(2).strip()
                if len(info.split()) > 1 or (match.group(1)[0] == "`" and "`" in info):
                    self.problems.append((number, f"a fence with prose after it ({line.strip()[:40]!r}): an info string is one word, and a closing fence takes none"))
                flush()
                fence = (match.group(1), number)
                continue
            for found in HTML_ID.finditer(line):
                self.anchors.add(found.group(1))
            for found in INCLUDE.finditer(line):
                self.includes.append(found.group(1))
            heading = HEADING.match(line)
            if heading:
                flush()
                base = slug(heading.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                self.anchors.add(base if count == 0 else f"{base}-{count}")
                paragraph_line = number
                paragraph = [heading.group(2)]
                flush()
            elif not line.strip():
                flush()
            else:
                if not paragraph:
                    paragraph_line = number
                paragraph.append(line)
        flush()
        if fence:
            self.problems.append((fence[1], "this code block never closes: everything after it renders as code"))


def check(root):
    root = os.path.realpath(root)
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in ("target", "book") and not d.startswith("."))
        files += [os.path.join(directory, n) for n in sorted(names) if n.endswith(".md")]
    pages = {}

    def page(path):
        if path not in pages:
            pages[path] = Page(path)
        return pages[path]

    def anchors(path, depth=0):
        found = set(page(path).anchors)
        if depth < 4:
            for include in page(path).includes:
                target = os.path.realpath(os.path.join(os.path.dirname(path), include))
                if os.path.isfile(target):
                    found |= anchors(target, depth + 1)
        return found

    problems = []
    for path in files:
        name = os.path.relpath(path, root)
        for number, message in page(path).problems:
            problems.append(f"{name}:{number}: {message}")
        for number, href in page(path).links:
            if re.match(r"^(https?:|mailto:)", href):
                continue
            target, _, anchor = href.partition("#")
            resolved = os.path.realpath(os.path.join(os.path.dirname(path), target)) if target else path
            if not (resolved == root or resolved.startswith(root + os.sep)) or not os.path.exists(resolved):
                problems.append(f"{name}:{number}: broken link: {href}")
                continue
            if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
                if urllib.parse.unquote(anchor) not in anchors(resolved):
                    problems.append(f"{name}:{number}: no heading for the anchor of {href} in {os.path.relpath(resolved, root)}")
    problems += unlogged_runs(root, [(path, page(path)) for path in files])
    return problems, len(files)


def unlogged_runs(root, pages):
    """Problems for every run a page outside `runs/` names (Page.runs) that
    has no directory `runs/<date>/call<N>`."""
    runs = os.path.join(root, "runs")
    if not os.path.isdir(runs):
        return []
    logged = set()
    for date in os.listdir(runs):
        if os.path.isdir(os.path.join(runs, date)):
            logged |= {d for d in os.listdir(os.path.join(runs, date)) if re.fullmatch(r"call\d+[a-c]?", d)}
    return [
        f"{os.path.relpath(path, root)}:{number}: names call {run}, which has no log directory in runs/"
        for path, page in pages
        if not path.startswith(runs + os.sep)
        for number, run in page.runs
        if "call" + run not in logged
    ]


def self_test():
    import tempfile

    cases = {
        "Two ways to build the kernels": "two-ways-to-build-the-kernels",
        "What is checked: every timed operation": "what-is-checked-every-timed-operation",
        "Step 3: `ncclCommWindowRegister` (and `NCCL_WIN_COLL_SYMMETRIC`)": "step-3-ncclcommwindowregister-and-nccl_win_coll_symmetric",
        "Lesson 05 — 2 × H200, 4.4 µs": "lesson-05--2--h200-44-µs",
        "[Link text](x.md) and <em>tags</em>": "link-text-and-tags",
        "snake_case and kebab-case": "snake_case-and-kebab-case",
    }
    failed = 0
    for heading, expected in cases.items():
        if slug(heading) != expected:
            print(f"self-test: slug({heading!r}) = {slug(heading)!r}, expected {expected!r}", file=sys.stderr)
            failed += 1
    pages = {
        "good.md": "# Title\n\n## Common issues\n\n## Common issues\n\n```sh\nls\n```\n\n[a](#common-issues) [b](#common-issues-1) [c](other.md#part-two)\n",
        "other.md": "# Part two\n",
        "open.md": "# T\n\n```sh\nls\n``` Then prose\n\n## Later\n",
        "anchor.md": "# T\n\n[gone](other.md#part-three) [here](#nowhere)\n",
        # call 3 has its directory; call 4 (a range's end) and call 5 do not;
        # a call named in code is not read.
        "runs.md": "# T\n\nAs call 3 showed, and calls 3 to 4.\nSee also call 5.\n\n```\ncall 6\n```\n",
    }
    expected_problems = {"good.md": 0, "open.md": 2, "anchor.md": 2, "runs.md": 2}
    for name, count in expected_problems.items():
        with tempfile.TemporaryDirectory() as directory:
            for page_name in (name, "other.md"):
                with open(os.path.join(directory, page_name), "w") as file:
                    file.write(pages[page_name])
            os.makedirs(os.path.join(directory, "runs", "2026-01-01", "call3"))
            problems, _ = check(directory)
            if len(problems) != count:
                print(f"self-test: {name}: expected {count} problems, found {problems}", file=sys.stderr)
                failed += 1
    print(f"self-test: {'failed' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    problems, files = check(sys.argv[1])
    for line in problems:
        print(f"broken: {line}", file=sys.stderr)
    if problems:
        sys.exit(f"docs/build: {len(problems)} problems in the markdown (links, anchors, fences, runs named without a log)")
    print(f"docs/build: every markdown link, anchor, code fence and run named checks out ({files} files)")
