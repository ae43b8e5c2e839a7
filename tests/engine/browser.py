"""Drive a Gradio TTS demo in headless Chromium as a person would: type a text, press Speak, wait for playback.

Run by the demo environment's python (``demo_env.ensure_demo_env``) as a file, not as an omnitts module: it
needs only the standard library and Selenium, which is handed Debian's chromedriver by path (no driver or
browser download). Writes a JSON report (what every ``<audio>`` element of the page held while it played)
and a PNG screenshot; the exit status is 0 whenever a report was written, and the caller judges it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

# The flags that work on these machines (closed network: no background connections), plus autoplay without a
# click on the audio element itself (the demo's Audio component has autoplay=True).
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
    "--window-size=1280,900",
)

# Every <audio> of the page: its source and how far it played (currentSrc is set for src= and for MediaSource).
AUDIO_STATE_JS = """
return Array.from(document.querySelectorAll('audio')).map(a => ({
  src: a.getAttribute('src') || '', currentSrc: a.currentSrc || '', paused: a.paused, ended: a.ended,
  currentTime: a.currentTime, duration: isFinite(a.duration) ? a.duration : null, readyState: a.readyState,
  played: a.played.length ? a.played.end(a.played.length - 1) : 0, error: a.error ? a.error.code : null,
}));
"""

# Gradio marks a failed event on the output component's status tracker; no point waiting for audio then.
ERROR_JS = """
return Array.from(document.querySelectorAll('[data-testid="status-tracker"] .error, [data-testid="toast-body"]'))
  .map(e => e.innerText.trim()).filter(t => t);
"""


def _played(states: list[dict]) -> dict | None:
    for state in states:
        if state["currentSrc"] and (state["played"] > 0 or state["ended"]):
            return state
    return None


def drive(args) -> dict:
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never fetch anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = args.chromium
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={args.profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    report: dict = {"url": args.url, "steps": []}
    started = time.monotonic()
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=args.chromedriver))
    try:
        driver.get(args.url)
        wait = WebDriverWait(driver, args.timeout)
        box = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "textarea")))
        report["title"] = driver.title
        report["steps"].append(f"loaded in {time.monotonic() - started:.1f} s")
        box.clear()
        box.send_keys(args.text)
        button = wait.until(ec.element_to_be_clickable((By.XPATH, "//button[normalize-space()='Speak']")))
        clicked = time.monotonic()
        button.click()
        report["steps"].append("typed the text, pressed Speak")
        states: list[dict] = []
        deadline = clicked + args.timeout
        while time.monotonic() < deadline:
            states = driver.execute_script(AUDIO_STATE_JS)
            if report.get("first_source_s") is None and any(s["currentSrc"] for s in states):
                report["first_source_s"] = round(time.monotonic() - clicked, 2)
            errors = driver.execute_script(ERROR_JS)
            if errors:
                report["demo_error"] = errors
                break
            if _played(states):
                report["playing_s"] = round(time.monotonic() - clicked, 2)
                # Let it play a little so the screenshot shows a playing player and currentTime moved.
                time.sleep(args.settle)
                states = driver.execute_script(AUDIO_STATE_JS)
                break
            time.sleep(0.25)
        report["audio"] = states
        report["played"] = _played(states)
        report["page_errors"] = [
            entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"
        ]
        driver.save_screenshot(args.screenshot)
        report["screenshot"] = args.screenshot
    finally:
        driver.quit()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--profile", required=True, help="an empty folder for Chromium's --user-data-dir")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--settle", type=float, default=1.5)
    args = parser.parse_args()
    try:
        report = drive(args)
    except Exception as exc:  # the caller fails the test with this message
        report = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
    with open(args.report, "w") as fh:
        json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
