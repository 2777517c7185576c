"""Agent sessions for judging Lore in the agent's loop (issue 33): transcripts, lessons, prompts.

Written for this purpose, by hand, before the hooks were tuned: 30 scenarios of everyday
engineering work in six repositories, each with the lesson it teaches (problem, resolution),
the person's prompt, a command that fails with its real-looking output, and the command that
passes once fixed. Each scenario becomes sessions of several kinds, as Claude Code writes them
(JSON Lines: ``type`` user/assistant, ``message.content`` with ``tool_use``/``tool_result``):

- learned: ``fix`` (the command fails, the agent edits, it passes), ``correction`` (the
  person corrects the agent), ``struggle`` (four failed attempts, the person takes over);
- nothing learned: ``clean`` (it just works), ``question`` (an answer, no tools), ``saved``
  (a fix, and the agent already saved the lesson), ``probe`` (searches that find nothing, then
  something, then a passing run), ``thanks`` (a clean run and "no problem, thanks"), ``tdd``
  (a test written to fail first, then made to pass: a hard case, which the hook does ask about);
- the person's say: ``skip`` (a fix, and ``#skip``) and ``remember`` (a clean run and
  ``#remember``).

Sessions also carry where they start (repository, branch: the scenario's topic branch, or
``main``) and which lesson they needed, for the session-start measure, and each scenario has a
prompt that matches its lesson and one that matches nothing in the corpus, for the prompt bar.

Every session is in the dev half or the test half by a hash of its scenario, so no scenario
is in both: tune on ``half="dev"`` only, report ``half="test"``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Scenario(NamedTuple):
    repo: str
    branch: str
    prompt: str
    fail_cmd: str
    fail_out: str
    pass_cmd: str
    problem: str
    resolution: str
    other_prompt: str  # a prompt in the same repository that no lesson answers


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "payments-api",
        "fix/stripe-webhook-signature",
        "Stripe webhooks started failing signature checks after we moved behind nginx, can you fix it?",
        "pytest tests/test_webhooks.py",
        "E   stripe.error.SignatureVerificationError: No signatures found matching the expected signature for payload",
        "pytest tests/test_webhooks.py",
        "Stripe webhook signature verification fails behind nginx",
        "nginx re-encoded the request body; verify against the raw body bytes (request.get_data()) and set proxy_request_buffering off",
        "Rename the invoice_total field to amount_due across the serializers.",
    ),
    Scenario(
        "payments-api",
        "fix/decimal-rounding",
        "Refund amounts are off by a cent for some currencies, please look into it",
        "pytest tests/test_refunds.py -k currency",
        "AssertionError: assert Decimal('10.01') == Decimal('10.00')",
        "pytest tests/test_refunds.py -k currency",
        "Refund amounts off by one cent for zero-decimal currencies",
        "Use the currency's exponent from ISO 4217 (JPY has 0) and quantize with ROUND_HALF_EVEN instead of float math",
        "Add a docstring to the refund module explaining the states.",
    ),
    Scenario(
        "payments-api",
        "chore/upgrade-sqlalchemy",
        "Upgrade SQLAlchemy to 2.0 and make the test suite pass",
        "pytest -x",
        "sqlalchemy.exc.ArgumentError: Textual SQL expression 'SELECT 1' should be explicitly declared as text('SELECT 1')",
        "pytest -x",
        "SQLAlchemy 2.0 rejects raw SQL strings in execute()",
        "Wrap raw SQL in sqlalchemy.text() and pass parameters as a dict; session.execute('...') no longer accepts plain strings",
        "Write a short README section about how to run the service locally.",
    ),
    Scenario(
        "payments-api",
        "fix/celery-retry-storm",
        "The payout task retries forever when the bank API is down, stop that",
        "python -m pytest tests/test_payouts.py",
        "FAILED tests/test_payouts.py::test_retry_backoff - AssertionError: retried 500 times",
        "python -m pytest tests/test_payouts.py",
        "Celery task retries forever when the bank API is down",
        "Set max_retries=5 with retry_backoff=True and retry_jitter=True on the task; autoretry_for alone retries without limit",
        "Change the log format of the payout worker to JSON lines.",
    ),
    Scenario(
        "payments-api",
        "fix/alembic-enum",
        "The migration adding the new payout status fails on Postgres",
        "alembic upgrade head",
        'psycopg.errors.UndefinedObject: type "payout_status" does not exist',
        "alembic upgrade head",
        "Alembic migration adding an enum value fails on Postgres",
        "Alembic does not create or alter Postgres enum types by itself: run ALTER TYPE payout_status ADD VALUE outside the transaction (op.execute with autocommit_block)",
        "Bump the version number in pyproject.toml to 2.3.0.",
    ),
    Scenario(
        "web-frontend",
        "fix/vite-env-undefined",
        "import.meta.env.VITE_API_URL is undefined in production builds",
        "npm run build",
        'Error: [vite]: Rollup failed to resolve import "process" from "src/config.ts"',
        "npm run build",
        "VITE_ environment variables undefined in the production build",
        "Vite only exposes variables prefixed VITE_ from .env.production at build time; use import.meta.env, never process.env, and pass them as build args in Docker",
        "Make the header component's logo a bit bigger.",
    ),
    Scenario(
        "web-frontend",
        "fix/jest-esm",
        "Jest cannot import our new ESM-only date library",
        "npx jest src/utils",
        "SyntaxError: Cannot use import statement outside a module",
        "npx jest src/utils",
        "Jest fails on an ESM-only dependency with 'Cannot use import statement outside a module'",
        "Add the package to transformIgnorePatterns' exception list ('node_modules/(?!date-fns-esm)') so babel-jest transforms it",
        "Sort the imports in the components folder alphabetically.",
    ),
    Scenario(
        "web-frontend",
        "fix/hydration-mismatch",
        "React warns about a hydration mismatch on the pricing page",
        "npm test -- pricing",
        'Warning: Text content did not match. Server: "$10.00" Client: "10,00 $"',
        "npm test -- pricing",
        "React hydration mismatch from locale-dependent number formatting",
        "Format prices with an explicit locale (Intl.NumberFormat('en-US')) on both server and client; the server's default locale differs from the browser's",
        "Add a dark mode toggle to the settings page.",
    ),
    Scenario(
        "web-frontend",
        "fix/playwright-timeout",
        "The checkout e2e test times out in CI but passes locally",
        "npx playwright test checkout",
        "Test timeout of 30000ms exceeded. waiting for locator('button:has-text(\"Pay\")')",
        "npx playwright test checkout",
        "Playwright checkout test times out only in CI",
        "CI runs with a narrow viewport where the Pay button is hidden behind the cookie banner; dismiss the banner in a fixture and set viewport 1280x800",
        "Update the copyright year in the footer.",
    ),
    Scenario(
        "web-frontend",
        "chore/eslint-flat-config",
        "Move our ESLint setup to the new flat config",
        "npx eslint src",
        "Error: Cannot find module 'eslint-config-airbnb' imported from eslint.config.js",
        "npx eslint src",
        "ESLint flat config cannot load legacy shareable configs",
        "Wrap legacy configs with FlatCompat from @eslint/eslintrc (compat.extends('airbnb')); flat config only resolves imported objects",
        "Rename the Button component's variant prop values to primary and ghost.",
    ),
    Scenario(
        "infra",
        "fix/terraform-state-lock",
        "terraform apply says the state is locked and nobody is running it",
        "terraform apply -auto-approve",
        "Error: Error acquiring the state lock: ConditionalCheckFailedException",
        "terraform apply -auto-approve",
        "Terraform state lock stuck after a cancelled CI job",
        "Check the DynamoDB lock table for the LockID, confirm no run is active, then terraform force-unlock <ID>; set -lock-timeout=5m in CI",
        "Add tags for the cost center to the S3 buckets.",
    ),
    Scenario(
        "infra",
        "fix/k8s-crashloop",
        "The worker pods are in CrashLoopBackOff after the last deploy",
        "kubectl rollout status deploy/worker",
        'error: deployment "worker" exceeded its progress deadline',
        "kubectl rollout status deploy/worker",
        "Worker pods crash-loop after deploy: OOMKilled at start",
        "The new image loads the model at import; raise the memory limit to 1Gi and add a startupProbe so liveness does not kill it while loading",
        "Write a runbook entry for rotating the Grafana admin password.",
    ),
    Scenario(
        "infra",
        "fix/helm-immutable-selector",
        "helm upgrade fails with a field is immutable error",
        "helm upgrade api ./charts/api",
        'Error: UPGRADE FAILED: Deployment.apps "api" is invalid: spec.selector: Invalid value: field is immutable',
        "helm upgrade api ./charts/api",
        "helm upgrade fails: spec.selector field is immutable",
        "A label used in the selector changed; keep selector labels stable (only app.kubernetes.io/name and instance) or delete the Deployment with --cascade=orphan before upgrading",
        "Add a description to each value in the chart's values.yaml.",
    ),
    Scenario(
        "infra",
        "fix/docker-pip-proxy",
        "Docker builds can't install Python packages on the office network",
        "docker build -t api .",
        "ERROR: Could not find a version that satisfies the requirement fastapi (from versions: none)",
        "docker build -t api .",
        "Docker build cannot reach PyPI behind the office proxy",
        "Pass --build-arg HTTPS_PROXY (Docker forwards proxy build args without declaring them) and add the proxy's CA to the image before pip install",
        "Pin the base image to python:3.12-slim.",
    ),
    Scenario(
        "infra",
        "fix/certbot-renewal",
        "The TLS certificate didn't renew and the site shows an expired cert",
        "certbot renew --dry-run",
        "Challenge failed for domain api.example.com: Invalid response from http://api.example.com/.well-known/acme-challenge: 301",
        "certbot renew --dry-run",
        "certbot renewal fails because the HTTP-01 challenge is redirected",
        "The nginx HTTPS redirect caught /.well-known/acme-challenge; serve that location over plain HTTP before the redirect block",
        "List all the cron jobs we run on the bastion host.",
    ),
    Scenario(
        "data-pipeline",
        "fix/spark-skew",
        "The nightly join job takes 5 hours since last week",
        "make nightly-join",
        "WARN TaskSetManager: Stage 12 has a task that ran 4h58m; 199 of 200 tasks finished in under 2 minutes",
        "make nightly-join",
        "Spark join job slowed to hours by one skewed key",
        "One customer id holds 40% of rows; enable spark.sql.adaptive.skewJoin.enabled or salt the key, and filter null keys before the join",
        "Rename the nightly job's output folder to daily.",
    ),
    Scenario(
        "data-pipeline",
        "fix/airflow-timezone",
        "The Airflow DAG runs an hour late since the clock change",
        "airflow dags test billing_export 2026-10-26",
        "AssertionError: expected run at 02:00 Europe/Berlin, scheduled 03:00",
        "airflow dags test billing_export 2026-10-26",
        "Airflow DAG runs an hour late after the DST change",
        "Use a timezone-aware start_date (pendulum.datetime(..., tz='Europe/Berlin')); naive start dates are UTC and cron schedules then ignore DST",
        "Document the DAG's owner and SLA in its docstring.",
    ),
    Scenario(
        "data-pipeline",
        "fix/parquet-int96",
        "Timestamps read back from our Parquet files are garbage in pandas",
        "python scripts/check_export.py",
        "ValueError: year 52196 is out of range",
        "python scripts/check_export.py",
        "Parquet timestamps from Spark read as year 52196 in pandas",
        "Spark wrote INT96 timestamps; set spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS, or read with pyarrow's coerce_int96_timestamp_unit='us'",
        "Add a progress bar to the export script.",
    ),
    Scenario(
        "data-pipeline",
        "fix/dbt-incremental",
        "The dbt incremental model duplicates rows on every run",
        "dbt run --select orders_daily",
        'Database Error: duplicate key value violates unique constraint "orders_daily_pkey"',
        "dbt run --select orders_daily",
        "dbt incremental model inserts duplicate rows each run",
        "Set unique_key='order_id' and incremental_strategy='merge'; without unique_key dbt only appends, and the is_incremental filter used >= on the timestamp",
        "Add column descriptions to the customers model's schema.yml.",
    ),
    Scenario(
        "data-pipeline",
        "fix/kafka-consumer-lag",
        "The events consumer keeps falling behind and rebalancing",
        "python -m pytest tests/test_consumer.py",
        "FAILED test_consumer_commits - CommitFailedError: group has already rebalanced",
        "python -m pytest tests/test_consumer.py",
        "Kafka consumer keeps rebalancing and lagging under load",
        "Processing a batch took longer than max.poll.interval.ms; lower max.poll.records to 100 and raise max.poll.interval.ms, commit after each batch",
        "Rename the consumer group to events-v2 in the config.",
    ),
    Scenario(
        "mobile-app",
        "fix/ios-pod-install",
        "pod install fails on the new M-series Macs",
        "pod install",
        "LoadError - dlsym(0x7f8, Init_ffi_c): symbol not found - /Library/Ruby/Gems/2.6.0/gems/ffi-1.15.5/lib/ffi_c.bundle",
        "pod install",
        "pod install fails on Apple Silicon with an ffi symbol error",
        "The system Ruby's ffi gem is built for x86_64; install Ruby with rbenv (arm64) and bundle exec pod install, never sudo gem install",
        "Change the app icon background to the new brand blue.",
    ),
    Scenario(
        "mobile-app",
        "fix/gradle-jdk",
        "The Android build broke after the Gradle upgrade",
        "./gradlew assembleDebug",
        "Android Gradle plugin requires Java 17 to run. You are currently using Java 11.",
        "./gradlew assembleDebug",
        "Android Gradle plugin 8 requires Java 17",
        "Set org.gradle.java.home to a JDK 17 in gradle.properties (or JAVA_HOME in CI); Android Studio's bundled JDK is not the one the terminal uses",
        "Translate the onboarding strings into Spanish.",
    ),
    Scenario(
        "mobile-app",
        "fix/rn-metro-cache",
        "The app still shows the old component after my change",
        "npx react-native start",
        "error: bundling failed: Error: Unable to resolve module ./OldBanner from src/Home.tsx",
        "npx react-native start",
        "React Native keeps serving a deleted module from Metro's cache",
        "Restart Metro with --reset-cache and delete $TMPDIR/metro-*; Metro's haste map keeps the old file after a rename",
        "Add analytics events to the settings screen.",
    ),
    Scenario(
        "mobile-app",
        "fix/push-token-sandbox",
        "Push notifications work in debug but not in TestFlight",
        "python3 scripts/send_test_push.py",
        "apns: 400 BadDeviceToken",
        "python3 scripts/send_test_push.py",
        "iOS push fails with BadDeviceToken in TestFlight builds",
        "TestFlight builds use the production APNs environment; tokens from debug builds are sandbox tokens. Send to api.push.apple.com for release builds",
        "Make the notification settings toggle remember its state.",
    ),
    Scenario(
        "mobile-app",
        "fix/fastlane-match",
        "Fastlane can't find the signing certificate in CI",
        "bundle exec fastlane beta",
        "No code signing identity found and can not create a new one because you enabled `readonly`",
        "bundle exec fastlane beta",
        "fastlane match finds no signing identity in CI",
        "The CI keychain was not unlocked: create_keychain plus match(keychain_name:, readonly: true) and set MATCH_PASSWORD in CI secrets",
        "Bump the build number script to use the date.",
    ),
    Scenario(
        "ml-service",
        "fix/cuda-oom-batch",
        "Training crashes with CUDA out of memory since we bumped the sequence length",
        "python train.py --config configs/base.yaml",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "python train.py --config configs/base.yaml",
        "CUDA out of memory after raising the sequence length",
        "Attention memory grows with the square of the length; halve the batch and use gradient accumulation, enable bf16 autocast and gradient checkpointing",
        "Add a --seed flag to the training script.",
    ),
    Scenario(
        "ml-service",
        "fix/onnx-export-dynamic",
        "The exported ONNX model only accepts batch size 1",
        "python scripts/export_onnx.py",
        "onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument: Got invalid dimensions for input: input_ids index: 0 Got: 8 Expected: 1",
        "python scripts/export_onnx.py",
        "Exported ONNX model rejects batch sizes other than 1",
        "Pass dynamic_axes={'input_ids': {0: 'batch', 1: 'seq'}} to torch.onnx.export; without it the traced shapes are fixed",
        "Write a model card for the sentiment model.",
    ),
    Scenario(
        "ml-service",
        "fix/tokenizer-parallelism",
        "The API logs a tokenizers fork warning and then hangs",
        "pytest tests/test_api.py",
        "huggingface/tokenizers: The current process just got forked, after parallelism has already been used. Disabling parallelism to avoid deadlocks...",
        "pytest tests/test_api.py",
        "Tokenizers fork warning followed by a hang in the API workers",
        "The tokenizer ran before gunicorn forked its workers; set TOKENIZERS_PARALLELISM=false or load the tokenizer in each worker (post_fork)",
        "Add request ids to the API's access log.",
    ),
    Scenario(
        "ml-service",
        "fix/numpy2-abi",
        "Import of our C extension fails after upgrading numpy",
        "python -c 'import fastsim'",
        "ImportError: numpy.core.multiarray failed to import; module compiled against ABI version 0x1000009 but this version of numpy is 0x2000000",
        "python -c 'import fastsim'",
        "C extension fails to import after the numpy 2 upgrade",
        "Rebuild the extension against numpy 2 (build-system requires numpy>=2.0); wheels built against numpy 1.x do not load on numpy 2",
        "Rename the fastsim module to simcore.",
    ),
    Scenario(
        "ml-service",
        "fix/mlflow-artifact-s3",
        "MLflow can't log artifacts to our S3 bucket from the cluster",
        "python scripts/log_run.py",
        "botocore.exceptions.NoCredentialsError: Unable to locate credentials",
        "python scripts/log_run.py",
        "MLflow artifact upload to S3 fails with NoCredentialsError on the cluster",
        "The client uploads artifacts itself, not the tracking server; give the job's service account the IAM role (IRSA) or set MLFLOW_S3_ENDPOINT_URL and AWS credentials in the job",
        "Add a chart of the loss curve to the weekly report.",
    ),
)

KINDS_LEARNED = ("fix", "correction", "struggle")
KINDS_NOTHING = ("clean", "question", "saved", "probe", "thanks", "tdd")
KINDS_SAY = ("skip", "remember")

CORRECTIONS = (
    "No, that's the wrong file, the handler is in {where}.",
    "That's not what I asked: keep the old behaviour and fix it in {where} instead.",
    "Actually, we don't patch vendored code here; change {where}.",
    "You should have checked {where} first, the config lives there.",
    "Wrong approach, revert that and look at {where}.",
)
FOLLOW_UPS = (
    "Great, can you also add a test for it?",
    "Thanks, that works.",
    "Now update the changelog too.",
)


def half_of(scenario_index: int) -> str:
    """``dev`` or ``test``, by a hash of the scenario (stable, about half each)."""
    digest = hashlib.sha256(f"agent-sessions:{scenario_index}".encode()).digest()
    return "dev" if digest[0] % 2 == 0 else "test"


@dataclass
class Session:
    """One session: its transcript lines, what should happen, and where it started."""

    id: str
    scenario: int
    kind: str
    half: str
    repository: str
    branch: str
    needed: str  # the scenario's problem text: the lesson the session needed
    lines: list[str] = field(default_factory=list)

    @property
    def learned(self) -> bool:
        return self.kind in KINDS_LEARNED

    @property
    def should_ask(self) -> bool:
        return self.kind in (*KINDS_LEARNED, "remember")


class _Writer:
    """Writes a Claude Code transcript: each entry with uuid, parent, session and cwd."""

    def __init__(self, session: str, cwd: str, branch: str) -> None:
        self.session, self.cwd, self.branch = session, cwd, branch
        self.lines: list[str] = []
        self.parent: str | None = None
        self.n = 0

    def _add(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.n += 1
        uid = f"{self.session}-{self.n:04d}"
        entry = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session,
            "version": "2.1.197",
            "gitBranch": self.branch,
            "type": kind,
            "message": message,
            "uuid": uid,
            "timestamp": f"2026-11-20T10:{self.n // 60:02d}:{self.n % 60:02d}.000Z",
            **extra,
        }
        self.lines.append(json.dumps(entry))
        self.parent = uid

    def prompt(self, text: str) -> None:
        self._add("user", {"role": "user", "content": text})

    def say(self, text: str) -> None:
        self._add(
            "assistant", {"role": "assistant", "type": "message", "content": [{"type": "text", "text": text}]}
        )

    def run(self, tool: str, arguments: dict[str, Any], output: str, failed: bool) -> None:
        tid = f"toolu_{self.session}_{self.n:04d}"
        block = {"type": "tool_use", "id": tid, "name": tool, "input": arguments}
        self._add("assistant", {"role": "assistant", "type": "message", "content": [block]})
        result = {"type": "tool_result", "tool_use_id": tid, "content": output, "is_error": failed}
        self._add("user", {"role": "user", "content": [result]}, toolUseResult={"stdout": output})

    def bash(self, command: str, output: str, failed: bool = False) -> None:
        shown = f"Exit code 1\n{output}" if failed else output
        self.run("Bash", {"command": command, "description": "Run a command"}, shown, failed)

    def edit(self, path: str) -> None:
        self.run(
            "Edit",
            {"file_path": path, "old_string": "a", "new_string": "b"},
            f"The file {path} has been updated.",
            False,
        )


def _session(index: int, scenario: Scenario, kind: str, variant: int) -> Session:
    sid = f"s{index:02d}-{kind}"
    branch = scenario.branch if (index + variant) % 3 else "main"
    w = _Writer(sid, f"/home/dev/{scenario.repo}", branch)
    where = f"src/{scenario.repo.split('-')[0]}/handlers.py"
    ok = "collected 12 items\n\n12 passed in 1.84s"
    if kind == "question":
        w.prompt(f"Quick question: what does {where} do?")
        w.say("It wires the request handlers and their retries.")
    elif kind in ("clean", "thanks", "remember"):
        w.prompt(scenario.other_prompt + (" #remember" if kind == "remember" else ""))
        w.run("Read", {"file_path": where}, "def handler(): ...", False)
        w.edit(where)
        w.bash(scenario.pass_cmd, ok)
        w.say("Done.")
        if kind == "thanks":
            w.prompt("No problem, thanks!")
            w.say("You're welcome.")
    elif kind == "probe":
        w.prompt(scenario.other_prompt)
        w.bash(f"grep -rn old_name {where}", "", failed=True)
        w.bash(f"grep -rn handler {where}", f"{where}:1:def handler(): ...")
        w.edit(where)
        w.bash(scenario.pass_cmd, ok)
        w.say("Renamed and the tests pass.")
    elif kind == "correction":
        w.prompt(scenario.prompt)
        w.edit("vendor/lib/patch.py")
        w.say("I patched the vendored library.")
        w.prompt(CORRECTIONS[index % len(CORRECTIONS)].format(where=where))
        w.edit(where)
        w.bash(scenario.pass_cmd, ok)
        w.say(f"Fixed in {where}.")
    elif kind == "struggle":
        w.prompt(scenario.prompt)
        for attempt in range(4):
            w.edit(where)
            w.bash(
                f"{scenario.fail_cmd} --attempt {attempt}" if attempt % 2 else scenario.fail_cmd,
                scenario.fail_out,
                failed=True,
            )
        w.say("I could not make it pass; the error persists.")
    else:  # fix, saved, skip, tdd
        prompt = scenario.prompt + (" #skip" if kind == "skip" else "")
        if kind == "tdd":
            prompt = f"Write a failing test for {scenario.other_prompt.lower().rstrip('.')} first, then implement it."
        w.prompt(prompt)
        w.bash(scenario.fail_cmd, scenario.fail_out, failed=True)
        w.run("Read", {"file_path": where}, "def handler(): ...", False)
        w.edit(where)
        w.bash(scenario.pass_cmd, ok)
        if kind == "saved":
            w.run(
                "mcp__plugin_lore_lore__save_lesson",
                {"problem": scenario.problem, "resolution": scenario.resolution},
                '{"id": "01KSAVED", "merged": false}',
                False,
            )
        w.say("Fixed; the tests pass now.")
    return Session(sid, index, kind, half_of(index), scenario.repo, branch, scenario.problem, w.lines)


def sessions(half: str | None = None) -> list[Session]:
    """Every session of every scenario (of one half when ``half`` is given)."""
    kinds = (*KINDS_LEARNED, *KINDS_NOTHING, *KINDS_SAY)
    made = [_session(i, s, kind, v) for i, s in enumerate(SCENARIOS) for v, kind in enumerate(kinds)]
    return [s for s in made if half is None or s.half == half]


def lessons() -> list[dict[str, Any]]:
    """The lessons the scenarios taught, each in its repository's project, with votes that vary."""
    return [
        {
            "problem": s.problem,
            "resolution": s.resolution,
            "project": s.repo,
            "upvotes": (i * 7) % 5,
            "tags": [s.repo.split("-")[0]],
            "scenario": i,
        }
        for i, s in enumerate(SCENARIOS)
    ]


def prompts(half: str | None = None) -> list[tuple[str, int | None, str]]:
    """(prompt, scenario whose lesson it needs or None, half): each scenario's task prompt and a
    prompt of its repository that no lesson answers."""
    out: list[tuple[str, int | None, str]] = []
    for i, s in enumerate(SCENARIOS):
        out += [(s.prompt, i, half_of(i)), (s.other_prompt, None, half_of(i))]
    return [p for p in out if half is None or p[2] == half]
