"""Time to a usable tools page with 2,000 tools (issue 60): a gateway serving a generated namespace of 2,000
tools, Debian's Chromium driven by Playwright; for each run a fresh browser context signs in and opens
/ui/tools, and the time runs until the table shows every tool and a search narrows it.

    .venv/bin/python bench/dashboard.py [--tools 2000] [--runs 5]

Prints a table: the gateway's /namespaces answer alone, then the page's phases (first paint of the sign-in
form, tools listed, a search answered; a search and an annotation filter timed inside the page, without
Playwright's round trips), median and worst of the runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-dashboard-token"


IN_PAGE = {  # phase -> a script run in the tools page that returns how long the page took (ms)
    "search, in page": """() => { const s = document.querySelector('input[type=search]'); const t = performance.now();
        s.value = 'tool_0042'; s.dispatchEvent(new Event('input')); document.body.offsetHeight;
        const ms = performance.now() - t; s.value = ''; s.dispatchEvent(new Event('input')); return ms; }""",
    "annotation filter, in page": """() => {
        const f = document.querySelectorAll('.filters select')[1]; const t = performance.now();
        f.value = 'read-only'; f.dispatchEvent(new Event('input')); document.body.offsetHeight;
        const ms = performance.now() - t; f.value = ''; f.dispatchEvent(new Event('input')); return ms; }""",
}


def tools_file(count: int) -> str:
    lines = ["from fastmcp.tools import tool", ""]
    for index in range(count):
        lines += ["", f"@tool(annotations={{'readOnlyHint': {index % 3 == 0}}})",
                  f"def tool_{index:04d}(text: str, times: int = 1) -> str:",
                  f'    """Tool number {index}: repeat a text."""', "    return text * times", ""]
    return "\n".join(lines)


def serve(folder: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "TOOLDOCK_BEARER_TOKEN": TOKEN, "TOOLDOCK_KEYS_DIR": str(folder / "keys"),
           "TOOLDOCK_SECRETS_DIR": str(folder / "secrets"), "TOOLDOCK_AGE_KEY_FILE": str(folder / "age.key")}
    proc = subprocess.Popen([str(ROOT / ".venv/bin/tooldock"), "serve", str(folder / "tools"), "--port", "0"],
                            env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = re.search(r"ready on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            sys.exit(f"the gateway exited:\n{log.read_text()}")
        time.sleep(0.2)
    sys.exit("the gateway did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "tools" / "many").mkdir(parents=True)
        (folder / "tools" / "many" / "tools.py").write_text(tools_file(args.tools))
        proc, url = serve(folder, folder / "gateway.log")
        try:
            api = []
            for _ in range(args.runs):
                started = time.perf_counter()
                httpx.get(url + "/namespaces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60).raise_for_status()
                api.append((time.perf_counter() - started) * 1000)
            phases: dict[str, list[float]] = {"sign-in form shown": [], "tools page usable": [], "search answered": []}
            phases.update({phase: [] for phase in IN_PAGE})
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
                for _ in range(args.runs):
                    context = browser.new_context()
                    page = context.new_page()
                    page.goto(url + "/ui/tools")
                    page.get_by_label("Bearer token or API key").fill(TOKEN)
                    started = time.perf_counter()
                    page.get_by_role("button", name="Sign in").click()
                    page.locator("#tool-count").filter(has_text=f"{args.tools} of {args.tools} tools").wait_for(timeout=120_000)
                    phases["tools page usable"].append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    page.get_by_label("Search tools").fill("tool_1999")
                    page.locator("#tool-count").filter(has_text=f"1 of {args.tools}").wait_for()
                    phases["search answered"].append((time.perf_counter() - started) * 1000)
                    # the page's own work (timed in the page, apart from Playwright's round trips): a search and
                    # a filter applied to every row, and the layout that follows
                    for phase, script in IN_PAGE.items():
                        phases[phase].append(page.evaluate(script))
                    context.close()
                    context = browser.new_context()
                    page = context.new_page()
                    started = time.perf_counter()
                    page.goto(url + "/ui/tools")
                    page.get_by_label("Bearer token or API key").wait_for()
                    phases["sign-in form shown"].append((time.perf_counter() - started) * 1000)
                    context.close()
                browser.close()
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"\ndashboard with {args.tools} tools, {args.runs} runs (Chromium {shutil.which('chromium')})\n")
    print(f"{'phase':<34} {'median ms':>10} {'worst ms':>10}")
    for name, values in (("GET /namespaces (API alone)", api), *phases.items()):
        print(f"{name:<34} {statistics.median(values):>10.0f} {max(values):>10.0f}")


if __name__ == "__main__":
    main()
