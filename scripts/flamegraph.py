#!/usr/bin/env python3
"""Turns `perf script` output (read from stdin) into a flame graph SVG on stdout.

A small stand-in for Brendan Gregg's stackcollapse-perf.pl + flamegraph.pl, which Debian does
not package: stacks are folded (root first, the thread name as the root frame), then drawn as
an icicle-free flame graph, one box per frame, width = share of the samples. Each box has a
<title> with the frame and its sample count, so hovering in a browser names it.
`--folded` prints the folded stacks instead ("a;b;c count" lines).
"""
import argparse
import collections
import html
import re
import sys


def fold(lines):
    stacks = collections.Counter()
    comm = None
    frames = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                stacks[";".join([comm] + list(reversed(frames)))] += 1
            comm, frames = None, []
            continue
        if not line[0].isspace():
            # "txmq-broker 123/124 [001] 12.34: 1001001 cpu-clock:" (fields vary by options)
            comm = re.split(r"\s+\d+/\d+\s|\s+\d+\s", line, maxsplit=1)[0].strip() or "?"
            frames = []
            continue
        parts = line.strip().split(" ", 1)
        if len(parts) < 2:
            continue
        sym = parts[1]
        sym = re.sub(r"\s+\([^()]*\)$", "", sym)  # the (dso)
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        if sym == "[unknown]":
            m = re.search(r"\(([^()]*)\)$", parts[1])
            sym = "[" + (m.group(1).rsplit("/", 1)[-1] if m else "unknown") + "]"
        frames.append(shorten(sym))
    if comm is not None:
        stacks[";".join([comm] + list(reversed(frames)))] += 1
    return stacks


def shorten(sym):
    # Template arguments and parameter lists make names unreadable in a box; keep the path.
    out, depth = [], 0
    for ch in sym:
        if ch in "<(":
            if depth == 0:
                out.append("<…>" if ch == "<" else "()")
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).replace(";", ":")
    return s[:200]


def build_tree(stacks):
    root = {"n": 0, "c": {}}
    for stack, count in stacks.items():
        node = root
        node["n"] += count
        for f in stack.split(";"):
            node = node["c"].setdefault(f, {"n": 0, "c": {}})
            node["n"] += count
    return root


def colour(name):
    h = 0
    for ch in name:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    r = 205 + h % 50
    g = 80 + (h >> 8) % 120
    b = 30 + (h >> 16) % 40
    return f"rgb({r},{g},{b})"


def svg(root, title, width=1800, row=16):
    boxes = []
    max_depth = [0]
    total = root["n"] or 1

    def walk(node, name, x, depth):
        w = node["n"] / total * (width - 20)
        if w < 0.3:
            return
        max_depth[0] = max(max_depth[0], depth)
        boxes.append((name, x, depth, w, node["n"]))
        cx = x
        for cname, child in sorted(node["c"].items()):
            walk(child, cname, cx, depth + 1)
            cx += child["n"] / total * (width - 20)

    walk(root, "all", 10, 0)
    height = (max_depth[0] + 1) * row + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="11">',
        f'<rect width="100%" height="100%" fill="#fdfdf5"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="15">{html.escape(title)} ({total} samples)</text>',
    ]
    for name, x, depth, w, n in boxes:
        y = height - 20 - (depth + 1) * row
        label = name if len(name) * 6.6 < w - 4 else name[: max(0, int((w - 4) / 6.6) - 1)] + ("…" if w > 14 else "")
        pct = 100.0 * n / total
        out.append(
            f'<g><title>{html.escape(name)} ({n} samples, {pct:.2f}%)</title>'
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" fill="{colour(name)}" rx="2"/>'
            + (f'<text x="{x + 3:.1f}" y="{y + row - 4}">{html.escape(label)}</text>' if w > 14 else "")
            + "</g>"
        )
    out.append("</svg>")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--title", default="flame graph")
    ap.add_argument("--folded", action="store_true", help="print folded stacks instead of SVG")
    a = ap.parse_args()
    stacks = fold(sys.stdin)
    if a.folded:
        for s, n in sorted(stacks.items()):
            print(s, n)
        return
    print(svg(build_tree(stacks), a.title))


if __name__ == "__main__":
    main()
