"""`qualify comment`: the fleet's summary as one comment on a pull request, edited on the next push.

GitHub cannot be reached from the machines the tests run on: a stand-in for its REST API for
issue comments answers on 127.0.0.1 (`helpers/github_stand_in.py` says what it plays and how),
and qualify runs as a real process against it, as a workflow's job runs it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO, qualify_proc
from helpers.github_stand_in import BOT, GitHub, Serving, person

from qualify.report.prbody import MAX_BODY, comment_body, marker

SUMMARY = REPO / "examples" / "llama-cpp-cuda" / "recorded" / "20261202-151725-cuda135.summary.md"
# No form a redaction rule knows by its shape: only its value can keep it out of the output.
TOKEN = "t0k3n-5d41402abc4b2a76b9719d911017c592"
REPOSITORY = "engine/llama"


def environment(github: GitHub, tmp_path: Path, number: int | None = 7, **more: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps({"pull_request": {"number": number}} if number else {"ref": "refs/heads/main"})
    )
    keep = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_") and "PROXY" not in k.upper()}
    return {
        **keep,
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_EVENT_NAME": "pull_request" if number else "push",
        **more,
    }


def comment(env: dict[str, str], markdown: Path = SUMMARY, *args: str) -> tuple[int, str]:
    done = qualify_proc("comment", str(markdown), *args, env=env)
    output = done.stdout + done.stderr
    for token in {TOKEN, env.get("GITHUB_TOKEN"), env.get("QUALIFY_BOT_TOKEN")} - {None}:
        assert str(token) not in output
    assert "Traceback" not in output
    return done.returncode, output


def bots(github: GitHub, number: int = 7) -> list[dict[str, object]]:
    return [c for c in github.on(number) if c["user"]["type"] == "Bot"]


def test_the_first_push_posts_and_the_next_edits_that_same_comment(tmp_path: Path) -> None:
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        github.add(7, "looks good to me", person())
        env = environment(github, tmp_path)
        code, output = comment(env)
        assert code == 0, output
        [posted] = bots(github)
        assert str(posted["body"]).splitlines()[0] == "<!-- qualify: qualify -->"
        assert str(posted["body"]).endswith(SUMMARY.read_text())
        assert f"posted comment {posted['id']}" in output
        newer = tmp_path / "summary.md"
        newer.write_text("## Toolchain qualification: **QUALIFIED**\n\nthe next push\n")
        code, output = comment(env, newer)
        assert code == 0, output
        assert bots(github) == [posted]  # the same comment, edited
        assert str(posted["body"]).endswith("the next push\n") and "updated comment" in output
        assert [r.method for r in github.requests].count("POST") == 1
        assert {r.authorization for r in github.requests} == {f"Bearer {TOKEN}"}
        assert len(github.on(7)) == 2  # the person's comment and qualify's


def test_a_person_s_comment_holding_the_marker_is_never_edited(tmp_path: Path) -> None:
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        quoted = f"{marker('qualify')}\nthe summary I pasted from the last run"
        theirs = github.add(7, quoted, person())
        code, output = comment(environment(github, tmp_path))
        assert code == 0, output
        assert theirs["body"] == quoted
        assert not [r for r in github.requests if r.method == "PATCH"]  # not even tried
        [ours] = bots(github)
        assert ours["id"] != theirs["id"]


def test_qualify_s_comment_is_found_on_a_later_page(tmp_path: Path) -> None:
    with Serving(GitHub(REPOSITORY, TOKEN, page_size=2)) as github:
        env = environment(github, tmp_path)
        for n in range(3):
            github.add(7, f"comment {n}", person())
        assert comment(env)[0] == 0  # the fourth comment: page 2
        for n in range(3):
            github.add(7, f"later comment {n}", person())
        another_bot = github.add(7, "a bot's comment of another tool", {**BOT, "login": "ci-bot[bot]"})
        newer = tmp_path / "summary.md"
        newer.write_text("## Toolchain qualification: **NOT QUALIFIED**\n")
        code, output = comment(env, newer, "--pr", "7")
        assert code == 0, output
        assert len(bots(github)) == 2 and another_bot["body"] == "a bot's comment of another tool"
        listed = [r.path for r in github.requests if r.method == "GET"]
        assert any("/repositories/4242/issues/7/comments" in path and "page=2" in path for path in listed)
        assert [r.method for r in github.requests].count("POST") == 1
        # Found on page 2, so the later pages were not asked for.
        assert not any("page=3" in path for path in listed[-2:])
        assert "updated comment" in output
        assert comment(env, newer)[1].startswith("unchanged: comment")  # nothing to edit
        assert [r.method for r in github.requests].count("PATCH") == 1


def test_two_keys_keep_a_comment_each(tmp_path: Path) -> None:
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        env = environment(github, tmp_path)
        for _ in range(2):
            assert comment(env, SUMMARY, "--key", "qualify nightly")[0] == 0
            assert comment(env, SUMMARY, "--key", "qualify")[0] == 0
        firsts = sorted(str(c["body"]).splitlines()[0] for c in bots(github))
        assert firsts == ["<!-- qualify: qualify -->", "<!-- qualify: qualify nightly -->"]
        code, output = comment(env, SUMMARY, "--key", "x --> <script>")
        assert code == 4 and "--key" in output


def test_a_token_that_may_not_write_gets_the_permission_to_set(tmp_path: Path) -> None:
    with Serving(GitHub(REPOSITORY, TOKEN, read_only=True)) as github:
        code, output = comment(environment(github, tmp_path))
        assert code == 2
        assert "403" in output and "Resource not accessible by integration" in output
        assert "pull-requests: write" in output
        assert not github.on(7)


def test_refusals_and_an_unreachable_api_are_clear(tmp_path: Path) -> None:
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        code, output = comment({**environment(github, tmp_path), "GITHUB_TOKEN": "wrong-9f86d081884c7d65"})
        assert code == 2 and "401" in output and "Bad credentials" in output and "GITHUB_TOKEN" in output
        code, output = comment({**environment(github, tmp_path), "GITHUB_REPOSITORY": "engine/other"})
        assert code == 2 and "404" in output and "GITHUB_REPOSITORY" in output
        closed = github.url
    code, output = comment({**environment(github, tmp_path), "GITHUB_API_URL": closed})
    assert code == 2 and "cannot reach" in output and "GITHUB_API_URL" in output


def test_what_to_set_when_the_job_gives_too_little(tmp_path: Path) -> None:
    github = GitHub(REPOSITORY, TOKEN, url="http://127.0.0.1:9")
    env = environment(github, tmp_path, number=None)
    code, output = comment(env)
    assert code == 4 and "--pr N" in output and "pull_request.number" in output
    code, output = comment({k: v for k, v in env.items() if k != "GITHUB_EVENT_PATH"})
    assert code == 4 and "--pr N" in output
    code, output = comment({k: v for k, v in env.items() if k != "GITHUB_TOKEN"}, SUMMARY, "--pr", "7")
    assert code == 4 and "no token in GITHUB_TOKEN" in output and "--token-env" in output
    code, output = comment({**env, "GITHUB_API_URL": "http://github.example/api"}, SUMMARY, "--pr", "7")
    assert code == 4 and "https://" in output  # the token is never sent in clear over a network
    code, output = comment(env, tmp_path / "missing.md", "--pr", "7")
    assert code == 4 and "qualify merge --out" in output


def test_another_variable_may_hold_the_token(tmp_path: Path) -> None:
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        env = {k: v for k, v in environment(github, tmp_path).items() if k != "GITHUB_TOKEN"}
        code, output = comment(
            {**env, "QUALIFY_BOT_TOKEN": TOKEN}, SUMMARY, "--token-env", "QUALIFY_BOT_TOKEN"
        )
        assert code == 0, output
        assert len(bots(github)) == 1


def test_a_summary_over_github_s_limit_is_cut_at_a_line(tmp_path: Path) -> None:
    lines = [f"| host-{n} | PASS | {'x' * (n % 97)} |" for n in range(4000)]
    text = (
        "\n".join(
            [
                "## Toolchain qualification across 4000 host(s): **QUALIFIED**",
                "",
                "```",
                *lines,
                "```",
                "the end",
            ]
        )
        + "\n"
    )
    body, cut = comment_body(text, "qualify")
    assert cut and len(text) > MAX_BODY >= len(body.encode("utf-16-le")) // 2
    kept = body.splitlines()[1:]
    note = next(i for i, line in enumerate(kept) if line.startswith("*The summary is cut here"))
    assert "65,536" in kept[note]
    whole = text.splitlines()
    # Whole lines of the summary, in order, then the code block closed before the note.
    assert kept[: note - 2] == whole[: note - 2] and kept[note - 2] == "```" and kept[note - 1] == ""
    assert comment_body("short\n", "qualify") == (f"{marker('qualify')}\nshort\n", False)
    huge = tmp_path / "huge.md"
    huge.write_text(text)
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        code, output = comment(environment(github, tmp_path), huge)
        assert code == 0, output
        [posted] = bots(github)
        assert posted["body"] == body and "cut" in output


@pytest.mark.parametrize("key", ["", "a--b", "x>y", "line\nbreak"])
def test_a_key_that_would_break_the_marker_is_refused(key: str) -> None:
    from qualify.core.errors import UsageError

    with pytest.raises(UsageError, match="--key"):
        marker(key)


def test_a_dry_run_prints_the_body_and_posts_nothing(tmp_path: Path) -> None:
    """Before: there was no way to see the comment short of posting it. `--dry-run` prints the
    body as GitHub would get it (marker line first) on stdout, needs no token, no pull request
    number and no API, and sends nothing."""
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        env = environment(github, tmp_path)
        bare = {k: v for k, v in env.items() if k not in ("GITHUB_TOKEN", "GITHUB_EVENT_PATH")}
        done = qualify_proc("comment", str(SUMMARY), "--dry-run", "--key", "nightly", env=bare)
        assert done.returncode == 0, done.stderr
        assert done.stdout == comment_body(SUMMARY.read_text(), "nightly")[0]
        assert done.stdout.splitlines()[0] == "<!-- qualify: nightly -->"
        as_json = qualify_proc("comment", str(SUMMARY), "--dry-run", "--json", env=bare)
        assert json.loads(as_json.stdout) == {
            "action": "dry-run",
            "body": comment_body(SUMMARY.read_text(), "qualify")[0],
            "cut": False,
        }
        assert github.requests == [] and github.on(7) == []


def test_a_file_that_is_not_a_summary_is_refused_naming_it(tmp_path: Path) -> None:
    """Before: any file was posted as it was: the fleet job's fleet.json became a comment of
    raw JSON. A summary is recognised by the heading every summary qualify writes begins with;
    anything else is refused, the file named, before a token is looked for or GitHub asked."""
    fleet_json = tmp_path / "fleet.json"
    fleet_json.write_text(json.dumps({"verdict": "QUALIFIED", "hosts": []}, indent=2))
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n\nnot from qualify\n")
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        for wrong in (fleet_json, notes):
            for dry in ([], ["--dry-run"]):
                code, output = comment(environment(github, tmp_path), wrong, *dry)
                assert code == 4, output
                assert f"{wrong}: not a summary qualify wrote" in output
                assert "DIR/summary.md" in output
        assert github.requests == []


def test_every_summary_qualify_writes_begins_with_the_heading_comment_looks_for() -> None:
    """What `read_summary` takes a summary by is what each summary template writes first."""
    from qualify.report.prbody import SUMMARY_HEADER

    for template in ("summary.md.j2", "set.md.j2", "fleet.md.j2"):
        lines = (REPO / "reports" / template).read_text().splitlines()
        first = next(line for line in lines if not line.startswith("{"))
        assert first.startswith(SUMMARY_HEADER), template


@pytest.mark.parametrize("levels", [100_000, 900])
def test_an_answer_nested_too_deeply_is_a_named_refusal(tmp_path: Path, levels: int) -> None:
    """Before: "internal error: RecursionError" (100 000 levels), or a crash where the answer
    was walked (900)."""
    with Serving(GitHub(REPOSITORY, TOKEN, nested=levels)) as github:
        code, output = comment(environment(github, tmp_path))
        assert code == 2, output
        assert "internal error" not in output and "nested too deeply" in output, output
        assert "/issues/7/comments" in output, output  # the request it answered is named


def test_another_bot_s_comment_holding_the_marker_is_never_edited(tmp_path: Path) -> None:
    """Before: the first bot comment with the marker was edited, whoever's bot wrote it (a tool
    that copies the summary, another workflow's app): the token may edit any bot's comment.
    Now only the account qualify posts as (a workflow's token: github-actions[bot]) is."""
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        copied = f"{marker('qualify')}\nthe summary, as another tool reposted it"
        theirs = github.add(7, copied, {"login": "other-ci[bot]", "id": 5150, "type": "Bot"})
        code, output = comment(environment(github, tmp_path))
        assert code == 0, output
        assert theirs["body"] == copied
        assert not [r for r in github.requests if r.method == "PATCH"]  # not even tried
        ours = [c for c in bots(github) if c["user"]["login"] == BOT["login"]]
        assert len(ours) == 1 and "posted comment" in output
        newer = tmp_path / "summary.md"
        newer.write_text("## Toolchain qualification: QUALIFIED\n")
        code, output = comment(environment(github, tmp_path), newer)
        assert code == 0 and "updated comment" in output, output
        assert theirs["body"] == copied and str(ours[0]["body"]).endswith(
            "## Toolchain qualification: QUALIFIED\n"
        )


def test_a_token_of_an_account_edits_that_account_s_comment_only(tmp_path: Path) -> None:
    """A personal or machine account's token: GitHub names its account (`GET /user`); that
    account's marked comment is edited (a person's type, since it is the token's own), the
    workflow bot's is not."""
    machine = {"login": "qualify-robot", "id": 8080, "type": "User"}
    with Serving(GitHub(REPOSITORY, TOKEN, account=machine, user_endpoint=True)) as github:
        line = marker("qualify")
        actions = github.add(7, f"{line}\nan older run's, from the workflow's token", BOT)
        ours = github.add(7, f"{line}\nthe last run's", machine)
        impostor = github.add(7, f"{line}\nsame name, another account", {**machine, "id": 9})
        code, output = comment(environment(github, tmp_path))
        assert code == 0 and f"updated comment {ours['id']}" in output, output
        assert str(ours["body"]).endswith(SUMMARY.read_text())
        assert "older run" in str(actions["body"]) and "another account" in str(impostor["body"])
        assert [r.method for r in github.requests].count("POST") == 0


def test_a_github_app_s_token_names_its_bot_with_as(tmp_path: Path) -> None:
    """A GitHub App's token is refused `GET /user`, as the workflow's is: taken for
    github-actions[bot], it posts, and is told which login GitHub gave its comment; with
    `--as` that login's comment is edited on the next push, the workflow bot's never."""
    app = {"login": "qualify-app[bot]", "id": 6060, "type": "Bot"}
    with Serving(GitHub(REPOSITORY, TOKEN, account=app)) as github:
        env = environment(github, tmp_path)
        code, output = comment(env)
        assert code == 0, output
        assert "qualify-app[bot] wrote it, not github-actions[bot]" in output, output
        assert "--as qualify-app[bot]" in output, output
        [posted] = github.on(7)
        workflow_s = github.add(7, f"{marker('qualify')}\nthe workflow bot's", BOT)
        newer = tmp_path / "summary.md"
        newer.write_text("## Toolchain qualification: NOT QUALIFIED\n")
        code, output = comment(env, newer, "--as", "qualify-app[bot]")
        assert code == 0 and f"updated comment {posted['id']}" in output, output
        assert str(workflow_s["body"]).endswith("the workflow bot's")
        assert str(posted["body"]).endswith("## Toolchain qualification: NOT QUALIFIED\n")
        done = qualify_proc("comment", str(newer), "--as", "qualify-app[bot]", "--json", env=env)
        assert json.loads(done.stdout) == {
            "action": "unchanged",
            "id": posted["id"],
            "url": posted["html_url"],
            "cut": False,
            "account": "qualify-app[bot]",
        }
