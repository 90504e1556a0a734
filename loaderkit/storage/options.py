"""``storage_options``: which may be recorded, which are secrets, and whom a plan file may reach.

Each store class declares its options once, in two tables: ``SAFE_OPTIONS`` (no credential:
an endpoint, a region, timeouts; a plan file may record them) and ``SECRET_OPTIONS``
(credentials and headers: accepted from code, never written to a plan file and never read from
one). Everything here reads those tables:

- :func:`check_options`: names a store does not know are refused, with a suggestion;
- :func:`recordable_options`: the options to write into a plan file; a secret among them is
  refused, naming it (pass credentials the standard way, or again at load time);
- :func:`check_endpoint`: a plan file cannot send the user's credentials to a server the user
  did not configure. An ``endpoint_url`` read from a plan file must be the endpoint the user's
  own configuration names (``AWS_ENDPOINT_URL``, the profile's ``endpoint_url``), unless the
  caller trusts the plan, passes the endpoint itself, or the store sends no credentials
  (``anonymous=True``); for ``http(s)://`` URLs read from a plan file, headers the caller
  passes (which may hold credentials) are refused unless the caller trusts the plan.
  ``docs/security.md`` states the rule.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from loaderkit._text import shown
from loaderkit._validate import unknown_keys
from loaderkit.errors import PlanError

__all__ = [
    "check_endpoint",
    "check_options",
    "option_tables",
    "recordable_options",
    "store_class",
]

_TRUST_FIX = (
    "pass storage_options={'endpoint_url': ...} yourself when you load the plan, set the "
    "endpoint in your own configuration (AWS_ENDPOINT_URL, or endpoint_url in ~/.aws/config), "
    "or load the plan as trusted if you wrote it"
)


def store_class(url: str) -> type[Any]:
    """The class of the store ``url``'s scheme names (its module imported, no client)."""
    from loaderkit.storage import _target, scheme_of

    module, _, name = _target(url, scheme_of(url)).partition(":")
    cls: type[Any] = getattr(importlib.import_module(module), name)
    return cls


def option_tables(url: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(safe, secret)``: the option names the store of ``url`` takes, split by kind."""
    cls = store_class(url)
    return frozenset(cls.SAFE_OPTIONS), frozenset(cls.SECRET_OPTIONS)


def check_options(url: str, storage_options: Mapping[str, Any]) -> None:
    """Refuse option names the store of ``url`` does not take (all of them, at once)."""
    safe, secret = option_tables(url)
    if not safe | secret and storage_options:
        raise PlanError.single(
            "storage_options",
            f"{shown(url)} is a local path, and local paths take no storage_options (got "
            f"{shown(sorted(storage_options))}); drop them",
        )
    problems = unknown_keys("storage_options", list(storage_options), sorted(safe | secret))
    if problems:
        raise PlanError(problems)


def recordable_options(url: str, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options of ``url`` a plan file may hold; a ``PlanError`` naming any secret.

    Call it where options are about to be serialized (a dataset factory recording how to make
    its dataset again). Credentials never go into a plan file: pass them the standard way
    (environment, config files) or again as ``storage_options`` when the plan is loaded.
    """
    options = dict(storage_options or {})
    check_options(url, options)
    _, secret = option_tables(url)
    found = sorted(k for k in options if k in secret)
    if found:
        raise PlanError.single(
            f"storage_options.{found[0]}",
            f"{', '.join(found)} would be written into the plan file, and credentials never go "
            f"into one; set them the standard way (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
            f"AWS_PROFILE, ~/.aws/credentials) or pass storage_options again when you load the "
            f"plan",
        )
    return options


def _plan_endpoint(
    url: str, cls: type[Any], plan: Mapping[str, Any], caller: Mapping[str, Any]
) -> None:
    """The endpoint rule for a store with an ``ENDPOINT_OPTION`` (S3)."""
    option: str = cls.ENDPOINT_OPTION
    endpoint = plan.get(option)
    if endpoint is None or option in caller:
        return  # the user's own configuration, or the caller's own choice
    if {**plan, **caller}.get("anonymous") is True:
        return  # unsigned requests: no credential is sent anywhere
    from loaderkit.storage.s3 import configured_endpoint, same_endpoint

    profile = {**plan, **caller}.get("profile")
    configured = configured_endpoint(profile if isinstance(profile, str) else None)
    if configured is not None and isinstance(endpoint, str):
        if same_endpoint(endpoint, configured[0]):
            return
        yours = f"your configuration names {shown(configured[0])} ({configured[1]})"
    else:
        yours = "your configuration names no endpoint"
    raise PlanError.single(
        f"storage_options.{option}",
        f"the plan file sends requests for {shown(url)}, signed with your credentials, to "
        f"{shown(endpoint)}, but {yours}; a plan file cannot choose where your credentials go: "
        f"{_TRUST_FIX}",
    )


def check_endpoint(
    url: str,
    storage_options: Mapping[str, Any] | None,
    *,
    from_plan_file: bool,
    caller_options: Mapping[str, Any] | None = None,
) -> None:
    """Refuse a plan file that would send the user's credentials where the user did not say.

    ``storage_options`` are the options the plan holds for ``url``, ``caller_options`` those
    the caller passes when loading it (trusted; they win). With ``from_plan_file=False`` (the
    caller wrote the URL and the options, or trusts the plan) nothing is checked. Otherwise:
    a secret in the plan's options is refused (a plan file holds no credentials); an S3
    ``endpoint_url`` from the plan must equal the endpoint the user's own configuration names
    (unless the caller names one, or ``anonymous=True``); an ``http(s)://`` URL from the plan
    gets no headers the caller passes (they may hold credentials). Each refusal is a
    ``PlanError`` naming the field, the endpoint and the fix.
    """
    if not from_plan_file:
        return
    plan = dict(storage_options or {})
    caller = dict(caller_options or {})
    check_options(url, plan)
    check_options(url, caller)
    cls = store_class(url)
    secrets = sorted(k for k in plan if k in cls.SECRET_OPTIONS)
    if secrets:
        raise PlanError.single(
            f"storage_options.{secrets[0]}",
            f"a plan file holds a credential ({', '.join(secrets)}) for {shown(url)}; plan "
            f"files never hold credentials: delete it from the file and set it the standard "
            f"way, or pass it as storage_options when you load the plan",
        )
    if getattr(cls, "ENDPOINT_OPTION", None) is not None:
        _plan_endpoint(url, cls, plan, caller)
        return
    sent = sorted(k for k in caller if k in cls.SECRET_OPTIONS)
    if sent:
        raise PlanError.single(
            f"storage_options.{sent[0]}",
            f"the URL {shown(url)} comes from a plan file, and the {', '.join(sent)} you pass "
            f"(which may hold credentials) would be sent to its server; a plan file cannot "
            f"choose where your credentials go: pass the URLs yourself, or load the plan as "
            f"trusted if you wrote it",
        )
