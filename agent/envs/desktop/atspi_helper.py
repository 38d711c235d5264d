"""A capped walk of the AT-SPI tree, printed as JSON: run by Debian's /usr/bin/python3, not the venv.

pyatspi comes only with the system Python (it needs ``gi``), and it must talk to the session bus
of the desktop's own uid, so the env runs this file as a helper process under that uid. It imports
nothing of Loupe's. Caps keep a huge widget (a spreadsheet's cells) from taking minutes: at most
``--max-children`` children a node, ``--max-depth`` levels and ``--max-nodes`` nodes in all; a
node with more children than the cap is marked ``truncated``.

Output: ``{"nodes": [{"id", "parent", "depth", "role", "name", "text", "x", "y", "width",
"height", "showing", "focused", "checked", "truncated"}], "capped": bool, "seconds": float}``;
extents are screen pixels (the screenshot's), ``x, y`` the top-left corner.
"""

import argparse
import json
import sys
import time

MAX_TEXT = 400


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-depth", type=int, default=24)
    parser.add_argument("--max-children", type=int, default=60)
    parser.add_argument("--max-nodes", type=int, default=1500)
    args = parser.parse_args()
    import pyatspi  # noqa: PLC0415 - the import itself can fail; main reports it

    started = time.monotonic()
    nodes = []
    capped = False
    stack = [(pyatspi.Registry.getDesktop(0), -1, 0)]
    while stack:
        node, parent, depth = stack.pop()
        if len(nodes) >= args.max_nodes:
            capped = True
            break
        record = {"id": len(nodes), "parent": parent, "depth": depth, "truncated": False}
        try:
            record["role"] = node.getRoleName()
            record["name"] = node.name or ""
            states = node.getState()
            record["showing"] = states.contains(pyatspi.STATE_SHOWING)
            record["focused"] = states.contains(pyatspi.STATE_FOCUSED)
            checkable = states.contains(pyatspi.STATE_CHECKABLE) or record["role"] in (
                "check box", "radio button", "toggle button", "check menu item", "radio menu item")
            record["checked"] = states.contains(pyatspi.STATE_CHECKED) if checkable else None
            count = node.childCount
        except Exception:  # a node that went away while we walked: skip it and its subtree
            continue
        record["text"] = ""
        try:
            text = node.queryText()
            record["text"] = text.getText(0, min(text.characterCount, MAX_TEXT))
        except Exception:
            pass
        try:
            box = node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
            record.update(x=box.x, y=box.y, width=box.width, height=box.height)
        except Exception:
            record.update(x=-1, y=-1, width=0, height=0)
        nodes.append(record)
        if depth >= args.max_depth:
            record["truncated"] = count > 0
            continue
        if count > args.max_children:
            record["truncated"] = capped = True
        children = []
        for index in range(min(count, args.max_children)):
            try:
                child = node.getChildAtIndex(index)
            except Exception:
                continue
            if child is not None:
                children.append((child, record["id"], depth + 1))
        stack.extend(reversed(children))
    json.dump({"nodes": nodes, "capped": capped, "seconds": round(time.monotonic() - started, 3)}, sys.stdout)


if __name__ == "__main__":
    main()
