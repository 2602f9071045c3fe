"""Query-side text helpers: word tokens, name keys, function words."""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+", re.UNICODE)

# Function words that never identify anything (English + Russian); used to skip
# meaningless name matches ("The", "Who") and to weight answer sentences.
_STOP_TEXT = """
a an and are as at be been but by can could did do does for from had has have he her his
how i if in into is it its me my no not of on or our she so than that the their them
then there these they this to was we were what when where which who whom whose why will
with would you your about after before between during also other such only same some
first last one two many much more most и в во не что он на я с со как а то все она так
его но да ты к у же вы за бы по только ее мне было вот от меня еще нет о из ему теперь
когда даже ну вдруг ли если уже или ни быть был него до вас нибудь опять уж вам ведь там
потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтоб
без будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой совсем
ним здесь этом один почти мой тем чтобы нее сейчас были куда зачем всех никогда можно
при наконец два об другой хоть после над больше тот через эти нас про всего них какая
много разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя
такой им более всегда конечно всю между
"""
STOPWORDS = frozenset(_STOP_TEXT.split())


def words(text: str) -> list[str]:
    """Casefolded word tokens (Unicode letters and digits)."""
    return _WORD.findall(text.casefold())


def fold(word: str) -> str:
    """Casefold and drop accents, so 'Aschenbrödel' matches 'Aschenbrodel' (and ё matches е)."""
    word = word.casefold()
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def raw_words(text: str) -> list[str]:
    """Word tokens as written (case kept)."""
    return _WORD.findall(text)


def name_key(name: str) -> str:
    """The key a name is matched on: folded words joined by one space."""
    return " ".join(fold(w) for w in raw_words(name))


def is_stop_key(key: str) -> bool:
    """A key made only of function words (or too short to name anything)."""
    parts = key.split()
    return not parts or len(key) < 2 or all(p in STOPWORDS for p in parts)
