#!/usr/bin/env python3
"""Renders the Grafana dashboard's panels from a real run, as a PNG for the README.

Runs the contention example (and, part-way, the leader_election example) with a real
Prometheus scraping both every second, then evaluates every panel query of
examples/grafana/mongolock-dashboard.json over the run through Prometheus' range API and
plots them with matplotlib. The picture is therefore the dashboard's own queries on real
data, not a mock-up.

    scripts/render-dashboard.py [--seconds 60] [--out examples/grafana/dashboard.png]

Installs what it needs when missing: Debian's `prometheus`, and matplotlib from PyPI.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(ROOT, "examples", "grafana", "mongolock-dashboard.json")


def ensure_tools():
    if shutil.which("prometheus") is None:
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"], check=True)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"], check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query_range(port, expr, start, end):
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": "1"})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query_range?{params}", timeout=10) as r:
        answer = json.load(r)
    if answer.get("status") != "success":
        raise RuntimeError(f"query failed: {expr}: {answer}")
    return answer["data"]["result"]


def legend(template, labels):
    text = template
    for key, value in labels.items():
        text = text.replace("{{" + key + "}}", value)
    return text if "{{" not in text else ", ".join(f"{k}={v}" for k, v in labels.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--out", default=os.path.join(ROOT, "examples", "grafana", "dashboard.png"))
    args = parser.parse_args()
    ensure_tools()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    subprocess.run(["cargo", "build", "-q", "--example", "contention", "--example", "leader_election"], cwd=ROOT, check=True)
    examples = os.path.join(ROOT, "target", "debug", "examples")
    contention_port, election_port, web_port = free_port(), free_port(), free_port()
    work = tempfile.mkdtemp(prefix="mongolock-dashboard-")
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            f"  - job_name: contention\n    static_configs:\n      - targets: ['127.0.0.1:{contention_port}']\n"
            f"  - job_name: leader_election\n    static_configs:\n      - targets: ['127.0.0.1:{election_port}']\n"
        )
    running = []
    try:
        running.append(subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={work}/data",
             f"--web.listen-address=127.0.0.1:{web_port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        start = time.time()
        contention = subprocess.Popen(
            [os.path.join(examples, "contention"), "--metrics-port", str(contention_port),
             "--duration", str(args.seconds), "--inject-loss-every", "10"],
            stdout=subprocess.DEVNULL)
        running.append(contention)
        time.sleep(min(10, args.seconds / 4))
        election = subprocess.Popen(
            [os.path.join(examples, "leader_election"), "--metrics-port", str(election_port)],
            stdout=subprocess.DEVNULL)
        running.append(election)
        contention.wait()
        election.wait()
        time.sleep(3)  # one more scrape of the final values
        end = time.time()

        dashboard = json.load(open(DASHBOARD))
        panels = dashboard["panels"]
        cols = 3
        rows = (len(panels) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(18, 4.2 * rows), squeeze=False)
        for ax, panel in zip(axes.flat, panels):
            ax.set_title(panel["title"], fontsize=11)
            if panel["type"] == "heatmap":
                series = query_range(web_port, panel["targets"][0]["expr"].replace("$__rate_interval", "5s"), start, end)
                buckets = sorted(
                    (float(s["metric"]["le"]) if s["metric"]["le"] != "+Inf" else float("inf"), s)
                    for s in series)
                times = [float(t) - start for t, _ in buckets[0][1]["values"]] if buckets else []
                grid, previous = [], None
                for le, s in buckets:  # cumulative buckets -> per-bucket counts
                    values = [float(v) for _, v in s["values"]]
                    row = values if previous is None else [a - b for a, b in zip(values, previous)]
                    previous = values
                    grid.append(row)
                if grid and times:
                    ax.imshow(grid, aspect="auto", origin="lower", cmap="Oranges",
                              extent=[times[0], times[-1], 0, len(grid)])
                    labels = [("+Inf" if le == float("inf") else f"{le:g}") for le, _ in buckets]
                    ax.set_yticks([i + 0.5 for i in range(len(labels))][::2])
                    ax.set_yticklabels(labels[::2], fontsize=7)
                    ax.set_ylabel("wait ≤ s (bucket)")
            else:
                for target in panel["targets"]:
                    expr = target["expr"].replace("$__rate_interval", "5s").replace('"$lock"', '".*"')
                    for s in query_range(web_port, expr, start, end):
                        xs = [float(t) - start for t, _ in s["values"]]
                        ys = [float(v) for _, v in s["values"]]
                        ax.plot(xs, ys, label=legend(target.get("legendFormat", ""), s["metric"]), linewidth=1.2)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=7, loc="upper right")
            unit = panel["fieldConfig"]["defaults"].get("unit", "")
            ax.set_xlabel("seconds into the run")
            if unit and panel["type"] != "heatmap":
                ax.set_ylabel(unit)
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        fig.suptitle(f"{dashboard['title']} — panel queries evaluated on a {args.seconds} s run "
                     "of examples/contention.rs and examples/leader_election.rs", fontsize=13)
        fig.tight_layout(rect=[0, 0, 1, 0.97])
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        fig.savefig(args.out, dpi=80)
        print(f"wrote {args.out}")
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
