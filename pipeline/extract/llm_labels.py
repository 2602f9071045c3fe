"""NEREL labels for the entity and relation types a model writes.

Why its own module: models label types their own way (OntoNotes/CoNLL tags, plain words,
plurals); the index keeps NEREL's classes, so each label is mapped to the closest class:
exact, a common alias (ORG, GPE, BORN_IN ...), a plural, else CONCEPT / RELATED_TO. Pure
functions over the prompt package's type lists.
"""

from __future__ import annotations

import re

from pipeline.llm.prompts import NEREL_ENTITY_TYPES, NEREL_RELATION_TYPES

__all__ = [
    "DEFAULT_ENTITY_TYPE",
    "DEFAULT_RELATION_TYPE",
    "normalize_entity_type",
    "normalize_relation_type",
]

DEFAULT_ENTITY_TYPE = "CONCEPT"
DEFAULT_RELATION_TYPE = "RELATED_TO"

_ENTITY_TYPES = frozenset(NEREL_ENTITY_TYPES) | {DEFAULT_ENTITY_TYPE}
_RELATION_TYPES = frozenset(NEREL_RELATION_TYPES) | {DEFAULT_RELATION_TYPE}
# Labels models commonly use instead of NEREL's (OntoNotes/CoNLL and plain words).
_ENTITY_ALIASES = {
    "PER": "PERSON",
    "PEOPLE": "PERSON",
    "CHARACTER": "PERSON",
    "ORG": "ORGANIZATION",
    "ORGANISATION": "ORGANIZATION",
    "COMPANY": "ORGANIZATION",
    "INSTITUTION": "ORGANIZATION",
    "AGENCY": "ORGANIZATION",
    "GPE": "COUNTRY",
    "NATION": "COUNTRY",
    "TOWN": "CITY",
    "VILLAGE": "CITY",
    "STATE": "STATE_OR_PROVINCE",
    "PROVINCE": "STATE_OR_PROVINCE",
    "REGION": "LOCATION",
    "LOC": "LOCATION",
    "PLACE": "LOCATION",
    "GEO": "LOCATION",
    "BUILDING": "FACILITY",
    "FAC": "FACILITY",
    "NORP": "NATIONALITY",
    "ETHNICITY": "NATIONALITY",
    "OCCUPATION": "PROFESSION",
    "JOB": "PROFESSION",
    "ROLE": "PROFESSION",
    "JOB_TITLE": "PROFESSION",
    "WORK": "WORK_OF_ART",
    "BOOK": "WORK_OF_ART",
    "FILM": "WORK_OF_ART",
    "MOVIE": "WORK_OF_ART",
    "SONG": "WORK_OF_ART",
    "ALBUM": "WORK_OF_ART",
    "PAINTING": "WORK_OF_ART",
    "ARTWORK": "WORK_OF_ART",
    "CARDINAL": "NUMBER",
    "QUANTITY": "NUMBER",
    "ILLNESS": "DISEASE",
    "MEDICAL_CONDITION": "DISEASE",
    "PRIZE": "AWARD",
    "LAW_OR_REGULATION": "LAW",
    "TREATY": "LAW",
    "YEAR": "DATE",
    "PARTY": "ORGANIZATION",
    "POLITICAL_PARTY": "ORGANIZATION",
    "TEAM": "ORGANIZATION",
    "DYNASTY": "FAMILY",
    "BELIEF": "IDEOLOGY",
    "TECHNOLOGY": "PRODUCT",
    "DEVICE": "PRODUCT",
    "SOFTWARE": "PRODUCT",
}
_RELATION_ALIASES = {
    "BORN_IN": "PLACE_OF_BIRTH",
    "DIED_IN": "PLACE_OF_DEATH",
    "LIVES_IN": "PLACE_RESIDES_IN",
    "RESIDES_IN": "PLACE_RESIDES_IN",
    "WORKS_FOR": "WORKPLACE",
    "WORKS_AT": "WORKPLACE",
    "EMPLOYED_BY": "WORKPLACE",
    "MARRIED_TO": "SPOUSE",
    "SPOUSE_OF": "SPOUSE",
    "SIBLING_OF": "SIBLING",
    "RELATIVE_OF": "RELATIVE",
    "FOUNDER_OF": "FOUNDED_BY",
    "LOCATED_AT": "LOCATED_IN",
    "IN": "LOCATED_IN",
    "BASED_IN": "HEADQUARTERED_IN",
    "OWNS": "OWNER_OF",
    "OWNED_BY": "OWNER_OF",
    "STUDIED_AT": "SCHOOLS_ATTENDED",
    "EDUCATED_AT": "SCHOOLS_ATTENDED",
    "ATTENDED": "SCHOOLS_ATTENDED",
    "PARTICIPATED_IN": "PARTICIPANT_IN",
    "MEMBER": "MEMBER_OF",
    "RECEIVED": "AWARDED_WITH",
    "WON": "AWARDED_WITH",
    "AWARDED": "AWARDED_WITH",
    "CAUSED_BY": "HAS_CAUSE",
    "PRODUCED": "PRODUCES",
    "CREATED": "PRODUCES",
    "AUTHOR_OF": "PRODUCES",
    "WROTE": "PRODUCES",
    "KNOWS_OF": "KNOWS",
    "FRIEND_OF": "KNOWS",
    "OCCURRED_IN": "TAKES_PLACE_IN",
    "HAPPENED_IN": "TAKES_PLACE_IN",
    "ALIAS": "ALTERNATIVE_NAME",
    "ALSO_KNOWN_AS": "ALTERNATIVE_NAME",
    "RELATED": "RELATED_TO",
    "ASSOCIATED_WITH": "RELATED_TO",
}
_LABEL_RE = re.compile(r"[^A-Z0-9]+")


def _label(raw: str | None) -> str:
    return _LABEL_RE.sub("_", (raw or "").upper()).strip("_")


def normalize_entity_type(raw: str | None) -> str:
    """A NEREL entity class (or CONCEPT) for a model's label: exact, alias, plural, else CONCEPT."""
    t = _label(raw)
    plural = t[:-3] + "Y" if t.endswith("IES") else t.removesuffix("S")
    for cand in (t, plural):
        if cand in _ENTITY_TYPES:
            return cand
        if cand in _ENTITY_ALIASES:
            return _ENTITY_ALIASES[cand]
    return DEFAULT_ENTITY_TYPE


def normalize_relation_type(raw: str | None) -> str:
    """A NEREL relation class for a model's label, else RELATED_TO."""
    t = _label(raw)
    if t in _RELATION_TYPES:
        return t
    return _RELATION_ALIASES.get(t, DEFAULT_RELATION_TYPE)
