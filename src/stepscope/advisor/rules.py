"""The advisor's rules as data (``data/advisor_rules.yaml``, plus users' files): loaded, checked and
frozen. The layout is documented at the top of the bundled file."""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..yamlio import safe_load
from .finding import CATEGORIES, SAVING_METHODS, Action, Category, Confidence, SavingMethod

_BUNDLED = "advisor_rules.yaml"
_STRAGGLER_SAVING = {"low": 0.5, "mid": 0.9, "high": 1.0}


@dataclass(frozen=True, kw_only=True)
class Condition:
    signal: str
    at_least: float | None = None
    below: float | None = None
    why: str = ""

    def holds(self, value: float | None) -> bool:
        if value is None:
            return False
        if self.at_least is not None and value < self.at_least:
            return False
        return self.below is None or value < self.below


@dataclass(frozen=True, kw_only=True)
class SavingModel:
    basis: str
    method: SavingMethod
    fractions: tuple[float, float, float]  # low, mid, high


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str
    category: Category
    title: str
    when: tuple[Condition, ...]
    unless: tuple[Condition, ...]  # any of these holding keeps the rule quiet (guards)
    evidence: tuple[str, ...]
    saving: SavingModel
    group: str
    confidence: Confidence
    cause: str
    actions: tuple[Action, ...]


@dataclass(frozen=True, kw_only=True)
class Card:
    """How a finding of the cluster view is worded and fixed, and its saving: a straggler (``key``:
    its ``Straggler.cause``) or a communication finding (``key``: ``small_messages``,
    ``low_bandwidth``)."""

    key: str
    category: Category
    title: str
    explanation: str
    actions: tuple[Action, ...]
    method: SavingMethod
    fractions: tuple[float, float, float]  # low, mid, high


@dataclass(frozen=True, kw_only=True)
class RuleSet:
    rules: tuple[Rule, ...]
    stragglers: tuple[Card, ...] = ()
    straggler_min_excess_ratio: float = 0.02
    cluster: tuple[Card, ...] = ()


def _need(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ConfigError(f"{where}: missing {key!r}", fix="see the layout at the top of data/advisor_rules.yaml")
    return d[key]


#: title fields that are text, not numbers (``engine._labels``)
TEXT_FIELDS = ("top_kernel",)


def _title_fields(title: str, where: str) -> None:
    """Only plain names in the title's format fields (no attribute or index access), each format
    spec valid for its value: text for ``TEXT_FIELDS``, a float otherwise (signals are floats)."""
    try:
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(title) if name is not None]
        for name, spec in fields:
            if not name.isidentifier():
                raise ConfigError(
                    f"{where}: title field {{{name}}} is not a plain signal name", fix="use {signal_name}"
                )
            format("x" if name in TEXT_FIELDS else 1.0, spec or "")
    except ValueError as exc:
        raise ConfigError(f"{where}: title {title!r} is not a valid format ({exc})", fix="e.g. {step_ms:.1f}") from None


def _category(d: Any, where: str) -> Category:
    category = _need(d, "category", where)
    if category not in CATEGORIES:
        raise ConfigError(f"{where}: category {category!r}", fix=f"one of {', '.join(CATEGORIES)}")
    return category  # type: ignore[no-any-return]


def _fractions(s: Any, where: str) -> tuple[float, float, float]:
    low, mid, high = (float(_need(s, k, where)) for k in ("low", "mid", "high"))
    if not 0 <= low <= mid <= high <= 1:
        raise ConfigError(f"{where}: saving fractions {low}, {mid}, {high}", fix="0 <= low <= mid <= high <= 1")
    return low, mid, high


def _saving(d: Any, where: str) -> tuple[SavingMethod, tuple[float, float, float]]:
    s = _need(d, "saving", where)
    method = _need(s, "method", where)
    if method not in SAVING_METHODS:
        raise ConfigError(f"{where}: saving method {method!r}", fix=f"one of {', '.join(SAVING_METHODS)}")
    return method, _fractions(s, where)


def _rule(d: Any, where: str) -> Rule:
    rid = str(_need(d, "id", where))
    where = f"{where} rule {rid!r}"
    category = _category(d, where)
    method, fractions = _saving(d, where)
    confidence = d.get("confidence", "medium")
    if confidence not in ("high", "medium", "low"):
        raise ConfigError(f"{where}: confidence {confidence!r}", fix="high, medium or low")
    title = str(_need(d, "title", where))
    _title_fields(title, where)
    when = _conditions(_need(d, "when", where), where)
    unless = _conditions(d.get("unless", ()) or (), where)
    return Rule(
        id=rid,
        category=category,
        title=title,
        when=when,
        unless=unless,
        evidence=tuple(str(e) for e in d.get("evidence", ())),
        saving=SavingModel(basis=str(_need(d["saving"], "basis", where)), method=method, fractions=fractions),
        group=str(d.get("group", rid)),
        confidence=confidence,
        cause=" ".join(str(_need(d, "cause", where)).split()),
        actions=_actions(d, where),
    )


def _number(v: Any) -> float | None:
    return None if v is None else float(v)


def _conditions(items: Any, where: str) -> tuple[Condition, ...]:
    return tuple(
        Condition(
            signal=str(_need(c, "signal", where)),
            at_least=_number(c.get("at_least")),
            below=_number(c.get("below")),
            why=str(c.get("why", "")),
        )
        for c in items
    )


def _actions(d: Any, where: str) -> tuple[Action, ...]:
    return tuple(
        Action(
            stack=str(_need(a, "stack", where)),
            change=str(_need(a, "change", where)),
            reference=str(a.get("reference", "")),
        )
        for a in d.get("actions") or ()
    )


def _card(d: Any, where: str, key: str, saving: tuple[SavingMethod, tuple[float, float, float]] | None) -> Card:
    """A cluster card keyed by ``d[key]``; its saving is ``saving`` or, when None, its own."""
    name = str(_need(d, key, where))
    where = f"{where} {key} {name!r}"
    title = str(_need(d, "title", where))
    _title_fields(title, where)
    method, fractions = saving if saving is not None else _saving(d, where)
    return Card(
        key=name,
        category=_category(d, where),
        title=title,
        explanation=" ".join(str(d.get("explanation", "")).split()),
        actions=_actions(d, where),
        method=method,
        fractions=fractions,
    )


def parse_rules(text: str, where: str) -> RuleSet:
    """A rule file; any malformed part is one ``ConfigError`` naming the file."""
    try:
        return _parse(text, where)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{where}: a rule is malformed ({exc})", fix="see data/advisor_rules.yaml") from None


def _parse(text: str, where: str) -> RuleSet:
    try:
        doc = safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({exc})", fix="fix the YAML syntax") from None
    rules = _need(doc, "rules", where)
    if not isinstance(rules, list):
        raise ConfigError(f"{where}: 'rules' is not a list", fix="see data/advisor_rules.yaml")
    straggler_method: SavingMethod = "critical_path"
    straggler_saving = (straggler_method, _fractions(doc.get("straggler_saving") or _STRAGGLER_SAVING, where))
    return RuleSet(
        rules=tuple(_rule(d, where) for d in rules),
        stragglers=tuple(_card(d, where, "cause", straggler_saving) for d in doc.get("stragglers", ()) or ()),
        straggler_min_excess_ratio=float(doc.get("straggler_min_excess_ratio", 0.02)),
        cluster=tuple(_card(d, where, "kind", None) for d in doc.get("cluster", ()) or ()),
    )


@lru_cache(maxsize=1)
def bundled_rules() -> RuleSet:
    return parse_rules(resources.files("stepscope.data").joinpath(_BUNDLED).read_text(encoding="utf-8"), _BUNDLED)


def load_rules(extra: tuple[str, ...] = ()) -> RuleSet:
    """The bundled rules, then each user file's ``rules``, ``stragglers`` and ``cluster`` entries: an
    entry whose id (cause, kind) is already there replaces it. A file's straggler entries take its
    ``straggler_saving``; the straggler threshold is the bundled file's."""
    base = bundled_rules()
    by_id = {r.id: r for r in base.rules}
    by_cause = {s.key: s for s in base.stragglers}
    by_kind = {c.key: c for c in base.cluster}
    for path in extra:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read advisor rules ({exc})", fix="pass a readable YAML file") from None
        user = parse_rules(text, path)
        by_id.update({r.id: r for r in user.rules})
        by_cause.update({s.key: s for s in user.stragglers})
        by_kind.update({c.key: c for c in user.cluster})
    return dataclasses.replace(
        base, rules=tuple(by_id.values()), stragglers=tuple(by_cause.values()), cluster=tuple(by_kind.values())
    )
