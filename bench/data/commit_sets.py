"""Rebuild the held-out commit-task sets the README's performance table measures.

    python bench/data/commit_sets.py --mirror MIRRORS --out DIR [SET ...]

Each set is ../shared/bench/make_commits.py run over the repositories listed below, read
from MIRRORS/OWNER+NAME/repo (bare clones with history, as the search tool's `fetch` leaves
them; fetch them first). Writes DIR/commits-SET.jsonl and checks its case count against the
one measured when the set was made, so a changed generator or a missing repository shows.
Repositories not in MIRRORS are named and the set is skipped. No set here was tuned on.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKE_COMMITS = ROOT.parent / "shared" / "bench" / "make_commits.py"

# name: (cases when made, repositories)
SETS: dict[str, tuple[int, list[str]]] = {
    "fresh": (905, [
        "getsentry/sentry-python", "PyGithub/PyGithub", "tweepy/tweepy", "praw-dev/praw",
        "sanic-org/sanic", "django/channels", "django/asgiref", "python-poetry/poetry",
        "pdm-project/pdm", "pypa/pipx", "simonw/sqlite-utils", "dbcli/pgcli",
        "python-lsp/python-lsp-server", "streamlink/streamlink", "jupyter/jupyter_client",
        "holoviz/param", "simonw/datasette", "pypa/setuptools"]),
    "fresh2": (806, [
        "python-telegram-bot/python-telegram-bot", "xonsh/xonsh", "pyinstaller/pyinstaller",
        "kivy/kivy", "pyqtgraph/pyqtgraph", "enthought/traits", "hylang/hy", "buildbot/buildbot",
        "spotify/luigi", "aws/chalice", "django-extensions/django-extensions",
        "jazzband/django-oauth-toolkit", "python-zeroconf/python-zeroconf", "certbot/certbot"]),
    "fresh3": (635, [
        "jd/tenacity", "arrow-py/arrow", "dateutil/dateutil", "PyCQA/isort", "PyCQA/bandit",
        "tqdm/tqdm", "cherrypy/cherrypy", "bottlepy/bottle", "falconry/falcon",
        "jazzband/django-debug-toolbar", "marshmallow-code/apispec", "pallets-eco/flask-sqlalchemy",
        "miguelgrinberg/python-socketio", "joke2k/faker", "Suor/funcy", "python-babel/babel"]),
    "fresh4": (793, [
        "pyparsing/pyparsing", "lark-parser/lark", "andialbrecht/sqlparse", "coleifer/peewee",
        "Supervisor/supervisor", "wtforms/wtforms", "pexpect/pexpect", "eventlet/eventlet",
        "PyCQA/pycodestyle", "Kinto/kinto", "pyserial/pyserial", "PyCQA/pyflakes",
        "sdispater/pendulum", "coleifer/huey", "fabric/fabric", "jazzband/tablib"]),
    "fresh5": (742, [
        "mahmoud/boltons", "pyeve/cerberus", "Python-Markdown/markdown", "lepture/mistune",
        "html5lib/html5lib-python", "gorakhargosh/watchdog", "giampaolo/psutil",
        "jazzband/prettytable", "asottile/pyupgrade", "PyCQA/autoflake", "pypa/build",
        "agronholm/typeguard", "jazzband/django-redis", "ipython/ipython", "davidhalter/parso",
        "google/yapf"]),
    "judge": (700, [
        "encode/starlette", "encode/uvicorn", "tox-dev/tox", "nedbat/coveragepy", "httpie/cli",
        "paramiko/paramiko", "python-poetry/cleo", "Textualize/textual", "networkx/networkx",
        "sqlalchemy/alembic", "jmespath/jmespath.py", "getsentry/responses", "mitmproxy/mitmproxy",
        "python-websockets/websockets", "redis/redis-py", "rq/rq"]),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", choices=[[], *SETS], metavar="SET",
                    help=f"sets to build (default: all): {', '.join(SETS)}")
    ap.add_argument("--mirror", type=Path, required=True, help="bare clones OWNER+NAME/repo")
    ap.add_argument("--out", type=Path, required=True, help="directory for commits-SET.jsonl")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in args.sets or SETS:
        cases, repos = SETS[name]
        missing = [r for r in repos if not (args.mirror / r.replace("/", "+") / "repo").is_dir()]
        if missing:
            print(f"{name}: skipped, not in {args.mirror}: {' '.join(missing)}")
            failed += 1
            continue
        out = args.out / f"commits-{name}.jsonl"
        subprocess.run([sys.executable, str(MAKE_COMMITS), str(out), "--mirror", str(args.mirror), *repos],
                       check=True, stdout=subprocess.DEVNULL)
        made = sum(1 for line in out.read_text().splitlines() if line.strip())
        same = "as when made" if made == cases else f"made with {cases}: the generator or a history changed"
        print(f"{name}: {made} cases in {out} ({same})")
        failed += made != cases
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
