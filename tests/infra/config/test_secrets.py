"""Stack-file mistakes with secrets: a token only as a Pulumi secret, never shown, each refused with
the file, the key and the fix, and nothing registered."""

from __future__ import annotations

from tests.infra.config.refusing import F, refused_text

# --- secrets --------------------------------------------------------------------------------------

def test_a_plain_text_token_is_refused_with_the_command_and_never_shown():
    msg = refused_text(lambda c: c.update(hfToken="hf_plaintextsecret"))
    assert msg == (f"{F}: hfToken: is written in plain text in the stack file, where anyone who can read the "
                   "repository reads it. Store it encrypted instead (remove the plain line first): pulumi config "
                   "set --secret hfToken <your token> --stack cross-server")
    assert "hf_plaintextsecret" not in msg


def test_a_token_of_the_wrong_type_is_refused_without_echoing_it():
    msg = refused_text(lambda c: c.update(hfToken={"value": "hf_plaintextsecret"}), secret_keys=["dynamo-lab:hfToken"])
    assert "hfToken: must be a single string" in msg and "hf_plaintextsecret" not in msg
