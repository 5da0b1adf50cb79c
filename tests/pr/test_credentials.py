"""The run's secrets, read once at the command line's edge (:class:`gate.pr.credentials.Credentials`)."""

import click
from click.testing import CliRunner

from gate.cli.common import handle_errors, register_secrets
from gate.errors import InputError
from gate.pr.credentials import Credentials

TOKEN = "ghs_" + "a1" * 18
FLAG = "ghp_" + "b2" * 18
KEY = "cache-signing-key-0123456789"


def test_the_secrets_are_read_from_the_environment_once_and_never_shown():
    credentials = Credentials.from_environ({"GITHUB_TOKEN": TOKEN, "RAG_GATE_CACHE_KEY": KEY, "HOME": "/h"}, FLAG)
    assert (credentials.github_token, credentials.flag_token, credentials.cache_key) == (TOKEN, FLAG, KEY)
    assert credentials.secrets == (FLAG, TOKEN, KEY)
    shown = repr(credentials) + str(credentials) + f"{credentials!r}"
    assert TOKEN not in shown and FLAG not in shown and KEY not in shown
    assert repr(credentials) == "Credentials(github_token=set, flag_token=set, cache_key=set)"


def test_empty_values_are_unset():
    credentials = Credentials.from_environ({"GITHUB_TOKEN": "", "RAG_GATE_CACHE_KEY": ""}, "")
    assert credentials == Credentials() and credentials.secrets == ()
    assert repr(credentials) == "Credentials(github_token=unset, flag_token=unset, cache_key=unset)"


def test_the_token_for_github_is_the_workflow_token_in_actions_and_the_flag_first_locally():
    both = Credentials(TOKEN, FLAG)
    assert both.github(in_actions=True) == TOKEN and both.github(in_actions=False) == FLAG
    assert Credentials(TOKEN).github(in_actions=False) == TOKEN
    assert Credentials(flag_token=FLAG).github(in_actions=True) is None  # a command line is never trusted there
    assert Credentials().github(in_actions=False) is None


def test_handle_errors_redacts_what_the_command_registered():
    """A token given as an option is not in the environment: the command registers it, and no error shows it."""

    @click.command()
    @click.option("--token")
    @handle_errors
    def command(token):
        register_secrets(Credentials(flag_token=token).secrets)
        raise InputError(f"the server said: bad credentials {token}")

    result = CliRunner().invoke(command, ["--token", FLAG], env={"GITHUB_TOKEN": None})
    assert result.exit_code == 2
    assert FLAG not in result.output and "bad credentials ***" in result.output
