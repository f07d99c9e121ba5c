"""Rebuild the held-out commit-task sets the README's performance table measures.

    python bench/data/commit_sets.py --mirror MIRRORS --out DIR [SET ...]

Each set is ../shared/bench/make_commits.py run over the repositories listed below, read
from MIRRORS/OWNER+NAME/repo (bare clones with history, as the search tool's `fetch` leaves
them; fetch them first). Writes DIR/commits-SET.jsonl and checks its case count against the
one measured when the set was made, so a changed generator or a missing repository shows.
Repositories not in MIRRORS are named and the set is skipped. No set here was tuned on but
the `tune-*` ones.

The sets in other languages (LANG_SETS) are made by make_commits_lang.py, the same rule for
the language's files. `tune-go`, `tune-js` and `tune-rust` were looked at to find where the
indentation layout went wrong (bench/prune_quality.py counts their sources as tuned on); the
others were made after those changes were written, to judge them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKE_COMMITS = ROOT.parent / "shared" / "bench" / "make_commits.py"
MAKE_COMMITS_LANG = Path(__file__).resolve().parent / "make_commits_lang.py"

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
    # Made for fitting the line model (bench/fit_line_model.py); the refit was not taken (the
    # weights stay those of 2026-11-27), so the engine has not been tuned on these.
    "fresh6": (1277, [
        "pallets/flask", "pallets/click", "pallets/werkzeug", "celery/celery", "celery/kombu",
        "benoitc/gunicorn", "Pylons/pyramid", "pypa/pip", "sqlalchemy/sqlalchemy",
        "pygments/pygments", "pylint-dev/pylint", "pylint-dev/astroid", "PyCQA/flake8",
        "beetbox/beets", "docker/docker-py", "dask/distributed", "python-jsonschema/jsonschema",
        "gitpython-developers/GitPython", "pre-commit/pre-commit", "agronholm/anyio",
        "python-gitlab/python-gitlab", "borgbackup/borg", "graphql-python/graphene",
        "cookiecutter/cookiecutter"]),
    "judge": (700, [
        "encode/starlette", "encode/uvicorn", "tox-dev/tox", "nedbat/coveragepy", "httpie/cli",
        "paramiko/paramiko", "python-poetry/cleo", "Textualize/textual", "networkx/networkx",
        "sqlalchemy/alembic", "jmespath/jmespath.py", "getsentry/responses", "mitmproxy/mitmproxy",
        "python-websockets/websockets", "redis/redis-py", "rq/rq"]),
}

# name: (cases when made, language, repositories)
LANG_SETS: dict[str, tuple[int, str, list[str]]] = {
    "tune-go": (249, "go", ["spf13/cobra", "gin-gonic/gin", "urfave/cli", "sirupsen/logrus",
                            "spf13/viper", "labstack/echo"]),
    "tune-js": (198, "js", ["expressjs/express", "axios/axios", "tj/commander.js", "yargs/yargs"]),
    "tune-rust": (240, "rust", ["BurntSushi/ripgrep", "clap-rs/clap", "sharkdp/fd", "serde-rs/serde"]),
    "go": (150, "go", ["junegunn/fzf", "go-chi/chi", "BurntSushi/toml", "go-yaml/yaml",
                       "mitchellh/mapstructure"]),
    "js": (185, "js", ["sindresorhus/got", "moment/moment", "immerjs/immer", "mochajs/mocha"]),
    "rust": (234, "rust", ["rust-lang/regex", "tokio-rs/mio", "sharkdp/bat", "serde-rs/json",
                           "hyperium/http"]),
    "c": (300, "c", ["DaveGamble/cJSON", "madler/zlib", "jqlang/jq", "tmux/tmux", "libuv/libuv"]),
    "java": (224, "java", ["google/gson", "apache/commons-lang", "junit-team/junit4",
                           "square/javapoet", "jhy/jsoup"]),
    "csharp": (139, "csharp", ["DapperLib/Dapper", "App-vNext/Polly", "Humanizr/Humanizer",
                               "restsharp/RestSharp"]),
    "cpp": (120, "c", ["nlohmann/json", "fmtlib/fmt"]),
    # Made after the layout changes, then looked at for the ones measured and not taken.
    "tune-ruby": (120, "ruby", ["rack/rack", "sinatra/sinatra"]),
    "tune-php": (120, "php", ["guzzle/guzzle", "slimphp/Slim"]),
    "tune-kotlin": (18, "kotlin", ["square/okhttp"]),
    "tune-csharp": (105, "csharp", ["JamesNK/Newtonsoft.Json", "AutoMapper/AutoMapper"]),
    "tune-ts": (47, "js", ["colinhacks/zod"]),
    "tune-go2": (169, "go", ["gorilla/mux", "julienschmidt/httprouter", "hashicorp/hcl",
                             "charmbracelet/bubbletea", "alecthomas/kingpin"]),
    # Looked at for the comment and preprocessor measurements of 2026-11-28 (sixth session).
    "tune-cpp": (261, "c", ["gabime/spdlog", "jbeder/yaml-cpp", "CLIUtils/CLI11",
                            "leethomason/tinyxml2", "zeux/pugixml"]),
    # Held out, made to judge the string and namespace changes once they were written.
    "csharp2": (227, "csharp", ["serilog/serilog", "FluentValidation/FluentValidation",
                                "commandlineparser/commandline", "NLog/NLog",
                                "AngleSharp/AngleSharp", "StackExchange/StackExchange.Redis"]),
    # Held out, made once every change of that session was in, to judge them together.
    "csharp3": (271, "csharp", ["JoshClose/CsvHelper", "MessagePack-CSharp/MessagePack-CSharp",
                                "protobuf-net/protobuf-net", "autofac/Autofac", "jbevain/cecil",
                                "icsharpcode/SharpZipLib"]),
    "go3": (153, "go", ["gofiber/fiber", "spf13/pflag", "stretchr/testify", "rs/zerolog"]),
    "rust3": (123, "rust", ["seanmonstar/reqwest", "BurntSushi/rust-csv", "rust-lang/log",
                            "dtolnay/anyhow"]),
    # TypeScript, made 2026-11-28 (seventh session): tune-ts2 looked at for the Javadoc and arrow
    # function changes, ts (eleven repositories never used) made to judge them.
    "tune-ts2": (182, "js", ["honojs/hono", "typeorm/typeorm", "trpc/trpc", "reduxjs/redux-toolkit"]),
    "ts": (482, "js", ["sindresorhus/ky", "mobxjs/mobx", "TanStack/query",
                       "react-hook-form/react-hook-form", "statelyai/xstate", "kysely-org/kysely",
                       "typestack/class-validator", "pmndrs/jotai", "socketio/socket.io",
                       "apollographql/apollo-client", "jaredpalmer/formik"]),
    # Python test files: tune-pytests from commits-dev's repositories, pytests from commits-fresh5's.
    "tune-pytests": (324, "python:tests", ["urllib3/urllib3", "aio-libs/aiohttp",
                                           "marshmallow-code/marshmallow", "scrapy/scrapy",
                                           "sphinx-doc/sphinx", "pydantic/pydantic"]),
    "pytests": (222, "python:tests", ["mahmoud/boltons", "pyeve/cerberus", "Python-Markdown/markdown",
                                      "lepture/mistune", "html5lib/html5lib-python",
                                      "gorakhargosh/watchdog", "giampaolo/psutil",
                                      "jazzband/prettytable", "asottile/pyupgrade", "PyCQA/autoflake",
                                      "pypa/build", "agronholm/typeguard", "jazzband/django-redis",
                                      "ipython/ipython", "davidhalter/parso", "google/yapf"]),
    # Kotlin, Swift, PHP, made 2026-11-28 (seventh session) once the Javadoc change was in:
    # tune-kotlin2 and tune-swift looked at (Swift's `extension X {` had no name), kotlin, swift
    # and php held out.
    "tune-kotlin2": (64, "kotlin", ["square/moshi", "square/kotlinpoet"]),
    "tune-swift": (120, "swift", ["Alamofire/Alamofire", "onevcat/Kingfisher"]),
    "kotlin": (72, "kotlin", ["JetBrains/Exposed", "InsertKoinIO/koin", "coil-kt/coil"]),
    "swift": (41, "swift", ["apple/swift-argument-parser", "ReactiveX/RxSwift", "SnapKit/SnapKit"]),
    "php": (187, "php", ["composer/composer", "Seldaek/monolog", "PHPMailer/PHPMailer",
                         "thephpleague/flysystem"]),
    # Test files (JS / TS), made 2026-11-28 (seventh session) to judge test titles as names:
    # jstests from the held-out ts and js repositories, tune-jstests looked at.
    "tune-jstests": (127, "js:tests", ["honojs/hono", "typeorm/typeorm", "trpc/trpc",
                                       "reduxjs/redux-toolkit", "expressjs/express", "axios/axios",
                                       "tj/commander.js", "yargs/yargs", "colinhacks/zod"]),
    "jstests": (367, "js:tests", ["sindresorhus/ky", "mobxjs/mobx", "TanStack/query",
                                  "react-hook-form/react-hook-form", "statelyai/xstate",
                                  "kysely-org/kysely", "typestack/class-validator", "pmndrs/jotai",
                                  "socketio/socket.io", "apollographql/apollo-client",
                                  "jaredpalmer/formik", "sindresorhus/got", "moment/moment",
                                  "immerjs/immer", "mochajs/mocha"]),
    "ruby": (180, "ruby", ["lostisland/faraday", "jnunemaker/httparty", "thoughtbot/factory_bot",
                           "ruby/rake", "sidekiq/sidekiq", "httprb/http"]),
}


# Function needles in other languages (make_needles_lang.py, at each repository's HEAD as
# fetched): name: (cases when made, language, id prefix, repositories). Written
# needles-NAME.jsonl.
NEEDLE_SETS: dict[str, tuple[int, str, str, list[str]]] = {
    "go": (99, "go", "g", ["junegunn/fzf", "go-chi/chi", "BurntSushi/toml", "go-yaml/yaml",
                      "mitchellh/mapstructure", "spf13/cobra", "gin-gonic/gin", "urfave/cli",
                      "spf13/viper", "labstack/echo"]),
    "rust": (124, "rust", "r", ["rust-lang/regex", "tokio-rs/mio", "sharkdp/bat", "serde-rs/json",
                           "hyperium/http", "BurntSushi/ripgrep", "clap-rs/clap", "sharkdp/fd",
                           "serde-rs/serde"]),
    "js": (41, "js", "j", ["sindresorhus/got", "moment/moment", "immerjs/immer", "mochajs/mocha",
                      "expressjs/express", "axios/axios", "tj/commander.js", "yargs/yargs",
                      "colinhacks/zod"]),
    "java": (64, "java", "v", ["google/gson", "apache/commons-lang", "junit-team/junit4",
                          "square/javapoet", "jhy/jsoup"]),
    # Made after the string and namespace changes; C#'s XML doc read as text.
    "csharp": (111, "csharp", "c", ["DapperLib/Dapper", "App-vNext/Polly", "Humanizr/Humanizer",
                                    "restsharp/RestSharp", "serilog/serilog",
                                    "FluentValidation/FluentValidation",
                                    "commandlineparser/commandline", "NLog/NLog",
                                    "AngleSharp/AngleSharp", "StackExchange/StackExchange.Redis"]),
    # Made from the held-out TypeScript set's repositories to judge the arrow function names.
    "ts": (61, "js", "t", ["sindresorhus/ky", "mobxjs/mobx", "TanStack/query",
                           "react-hook-form/react-hook-form", "statelyai/xstate",
                           "kysely-org/kysely", "typestack/class-validator", "pmndrs/jotai",
                           "socketio/socket.io", "apollographql/apollo-client",
                           "jaredpalmer/formik"]),
}
MAKE_NEEDLES_LANG = Path(__file__).resolve().parent / "make_needles_lang.py"


def generator(name: str) -> tuple[int, list[str], list[str], str]:
    """Cases when made, the command that makes the set (less its output), its repositories,
    and the file name it is written to."""
    if name in SETS:
        cases, repos = SETS[name]
        return cases, [str(MAKE_COMMITS)], repos, f"commits-{name}.jsonl"
    if name.startswith("needles-"):
        cases, lang, prefix, repos = NEEDLE_SETS[name.removeprefix("needles-")]
        command = [str(MAKE_NEEDLES_LANG), "--lang", lang, "--prefix", prefix]
        return cases, command, repos, f"{name}.jsonl"
    cases, lang, repos = LANG_SETS[name]
    command = [str(MAKE_COMMITS_LANG), "--lang", lang.removesuffix(":tests")]
    if lang.endswith(":tests"):  # the language's test files (make_commits_lang.py --tests)
        command.append("--tests")
    return cases, command, repos, f"commits-{name}.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [*SETS, *LANG_SETS, *(f"needles-{n}" for n in NEEDLE_SETS)]
    ap.add_argument("sets", nargs="*", choices=[[], *names], metavar="SET",
                    help=f"sets to build (default: all): {', '.join(names)}")
    ap.add_argument("--mirror", type=Path, required=True, help="bare clones OWNER+NAME/repo")
    ap.add_argument("--out", type=Path, required=True, help="directory for the SET.jsonl files")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in args.sets or names:
        cases, command, repos, file_name = generator(name)
        missing = [r for r in repos if not (args.mirror / r.replace("/", "+") / "repo").is_dir()]
        if missing:
            print(f"{name}: skipped, not in {args.mirror}: {' '.join(missing)}")
            failed += 1
            continue
        out = args.out / file_name
        subprocess.run([sys.executable, command[0], str(out), *command[1:], "--mirror", str(args.mirror),
                        *repos], check=True, stdout=subprocess.DEVNULL)
        made = sum(1 for line in out.read_text().splitlines() if line.strip())
        same = "as when made" if made == cases else f"made with {cases}: the generator or a history changed"
        print(f"{name}: {made} cases in {out} ({same})")
        failed += made != cases
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
