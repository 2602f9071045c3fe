"""Russian names through natasha: the named spans of a Russian sentence, typed and lemmatised.

The capitalised-run spans the extractor finds in English (spans.py) do poorly in Russian:
case endings split one name into several ("Москвы", "Москве"), sentence-initial words and
lower-case organisations ("полиция", "правительство") are missed. natasha (MIT; its
slovnet NER and morphology models and the navec embeddings are inside the PyPI wheels:
nothing is downloaded) tags PER, LOC and ORG in Russian news at F1 ~0.9-0.96 on its own
benchmarks, and normalises a span to its nominative ("Белого дома" -> "Белый дом"), so one
entity gets one title across case forms. On NEREL dev (benchmarks/ner.py) it reads 143k
characters in ~6 s on 2 cores with the morphology the lemmas need.

Types: PER -> PERSON; ORG -> ORGANIZATION; LOC -> the gazetteer's COUNTRY, CITY,
STATE_OR_PROVINCE or LOCATION where it knows the name (entity_types.type_span), else
LOCATION. pymorphy2 (under natasha's lemmatiser) finds its dictionary through
pkg_resources, which current setuptools no longer ships: the dictionary's path is passed.
"""

from __future__ import annotations

import re
from functools import cache

NATASHA_TYPES = {"PER": "PERSON", "ORG": "ORGANIZATION", "LOC": "LOCATION"}
PLACE_TYPES = frozenset({"COUNTRY", "CITY", "STATE_OR_PROVINCE", "LOCATION", "DISTRICT"})


@cache
def _models():
    import pymorphy2_dicts_ru
    from natasha import MorphVocab, NewsEmbedding, NewsMorphTagger, NewsNERTagger, Segmenter
    from natasha.morph.vocab import MorphForm
    from pymorphy2 import MorphAnalyzer

    class Vocab(MorphVocab):
        def __init__(self):
            MorphAnalyzer.__init__(self, path=pymorphy2_dicts_ru.get_path(), result_type=MorphForm)

    emb = NewsEmbedding()
    return Segmenter(), NewsMorphTagger(emb), NewsNERTagger(emb), Vocab()


def morph_vocab():
    """natasha's morph vocabulary (pymorphy2): a word's lemmas and universal POS tags."""
    return _models()[3]


def russian_names(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, natasha type, lemma) of every name natasha finds in `text`."""
    from natasha import Doc

    segmenter, morph, ner, vocab = _models()
    doc = Doc(text)
    doc.segment(segmenter)
    doc.tag_ner(ner)
    if not doc.spans:
        return []
    doc.tag_morph(morph)
    out = []
    for span in doc.spans:
        span.normalize(vocab)
        out.append((span.start, span.stop, span.type, span.normal or span.text))
    return out


# ---- the pattern layer: NEREL's classes a name tagger does not give -------------------------
# Word stems (Snowball-like, lower case) followed by any ending. The lists hold what Russian
# news names most often (NEREL's guidelines' examples and common news vocabulary); they are
# no sample of NEREL dev, whose scores (benchmarks/ner.py) judge them.
_PROFESSION_STEMS = """президент вице-президент премьер-министр премьер министр замминистр
    губернатор мэр депутат сенатор спикер председател руководител директор гендиректор
    начальник заместител помощник секретар пресс-секретар посол дипломат консул чиновник
    судь прокурор следовател адвокат юрист нотариус полицейск полковник подполковник генерал
    майор капитан лейтенант сержант рядов солдат офицер военнослужащ пограничник моряк летчик
    пилот космонавт астронавт журналист корреспондент редактор блогер телеведущ ведущ
    писател поэт драматург режиссер режиссёр сценарист продюсер актер актёр актрис артист
    певец певиц певц музыкант композитор дирижер дирижёр пианист скрипач гитарист барабанщик
    рэпер художник скульптор фотограф архитектор дизайнер модельер модел балерин танцор
    хореограф спортсмен футболист хоккеист теннисист боксер боксёр борец пловец бегун
    гимнаст фигурист лыжник биатлонист шахматист тренер чемпион олимпийск вратар нападающ
    защитник ученый учёный физик химик биолог математик историк экономист социолог психолог
    философ лингвист астроном инженер изобретател программист врач хирург медсестр медик
    фармацевт учител преподавател профессор доцент академик ректор декан студент школьник
    бизнесмен предпринимател банкир миллиардер миллионер олигарх инвестор основател
    совладел владел акционер менеджер экономист аналитик эксперт политик политолог лидер
    активист правозащитник священник священнослужител патриарх митрополит епископ кардинал
    папа муфтий имам раввин монах император императриц король королев принц принцесс царь
    царевич княз княгин герцог граф канцлер егер швей повар официант водител фермер
    строител рабоч шахтер шахтёр пожарн спасател охранник телохранител"""
_EVENT_STEMS = """умер умерл скончал погиб выбор голосовани референдум смерт гибел войн
    стрельб теракт взрыв убийств покушени авари катастроф крушени пожар землетрясени
    наводнени отставк назначен скандал самоубийств концерт гастрол задержан арест приговор
    суд процесс чемпионат олимпиад турнир матч финал фестивал конкурс премьер выставк саммит
    форум конференци визит переговор встреч митинг протест забастовк демонстраци акци
    революци переворот восстани эпидеми пандеми карантин церемони похорон свадьб развод
    женил госпитализир пресс-конференци брифинг капитуляци суицид выступлени освобожден
    геноцид"""
_DISEASE_STEMS = """коронавирус covid ковид грипп пневмони рак онкологи инфаркт инсульт
    диабет туберкулез туберкулёз вич спид гепатит кор деменци альцгеймер паркинсон
    лейкеми опухол цирроз астм аллерги депресси шизофрени аутизм эбол сарс"""
_ORGANIZATION_STEMS = """полици правительств парламент министерств ведомств мэри администраци
    прокуратур госдум минздрав минобороны минобрнауки мид мвд фсб фбр цру кгб оон нато
    евросоюз кремл"""
_WEEKDAYS = "понедельник вторник сред четверг пятниц суббот воскресен"
_MONTHS = "январ феврал март апрел мая мае май июн июл август сентябр октябр ноябр декабр"
_NUMBER_WORDS = """один одна одно одного одной одному одним одном два две двух двум двумя
    три трех трёх трем трём тремя четыре четырех четырёх четырем четырьмя пять пяти пятью
    шесть шести семь семи восемь восьми девять девяти десять десяти одиннадцать двенадцать
    двадцать двадцати тридцать сорок пятьдесят сто сотни двое трое четверо пятеро дважды
    трижды"""
# "12 тысяч", "8,1 млн": one number, its multiplier included (alone, "тысячи" is no number)
_MULTIPLIERS = "тысяч тыс млн млрд миллион миллиард"
_ORDINAL_STEMS = "перв втор трет четверт пят шест седьм восьм девят десят"
# a noun's case endings (and a stem's own vowel): "поэт" is no match in "поэтому"
_NOUN_ENDINGS = "|а|у|ом|е|ы|ов|ам|ами|ах|и|ей|ем|ю|я|ь|ям|ях|ями|ой|ою|ые|ого|ым|ых|ий|ая|ую"
_ORDINAL_ENDINGS = "ый|ой|ий|ая|ое|ые|ого|ому|ым|ом|ую|ых|ыми|ья|ье|ьи|ьего|ьему|ьим|ьем|ью|ьей"


def _stems(words: str) -> str:
    return "|".join(sorted({w.replace("ё", "е") for w in words.split()}, key=lambda w: -len(w)))


_RU_PATTERNS = [
    # a war with its adjectives: "Второй мировой войны", "гражданской войны"
    ("EVENT", r"(?i)(?<![\w-])(?:[а-яё]+(?:ой|ей|ая|ую|ый|ий) ){1,2}войн[а-яё]*"),
    (
        "DATE",
        rf"(?i)(?<!\w)(?:(?:в|во|на|с|до|к|по) )?(?:{_stems(_WEEKDAYS)})[а-яё]*"
        rf"|(?<!\w)(?:(?:в|с|до|к|по) )?(?:{_stems(_MONTHS)})[а-яё]*"
        r"(?: \d{4}(?: года)?)?(?![а-яё])"
        r"|(?<!\w)(?:сегодня|вчера|завтра|позавчера|накануне)(?!\w)"
        r"|(?<!\w)(?:в|на) (?:этом|прошлом|следующем|текущем) (?:году|месяце)"
        r"|(?<!\w)на (?:этой|прошлой|следующей) неделе",
    ),
    ("AGE", r"(?i)(?<!\w)\d{1,3}-летн[а-яё]*|(?<=возрасте )\d{1,3} (?:лет|года|год)"),
    ("ORDINAL", rf"(?i)(?<!\w)(?:{_stems(_ORDINAL_STEMS)})(?:{_ORDINAL_ENDINGS})(?![а-яё])"),
    ("ORDINAL", r"(?<![\w.,])\d{1,4}-(?:й|я|е|го|м|ом|ий|ая|ое|ые)(?![а-яё])|(?<!\w)№\s?\d+"),
    ("ORDINAL", r"(?<!\w)(?=[IVXLC]{2,}\b)[IVXLC]+(?!\w)"),
    ("NUMBER", rf"(?i)(?<![\w-])(?:{_stems(_NUMBER_WORDS)})(?![а-яё])"),
    (
        "NUMBER",
        rf"(?<![\w.,:/-])\d+(?:[.,]\d+)?(?: (?:{_stems(_MULTIPLIERS)})[а-яё]*\.?)?(?![\w.,:/%-])",
    ),
    ("PROFESSION", rf"(?i)(?<![\w-])(?:{_stems(_PROFESSION_STEMS)})(?:{_NOUN_ENDINGS})(?![а-яё])"),
    ("ORGANIZATION", rf"(?i)(?<![\w-])(?:{_stems(_ORGANIZATION_STEMS)})[а-яё]*"),
    ("EVENT", rf"(?i)(?<![\w-])(?:{_stems(_EVENT_STEMS)})[а-яё]*"),
    ("DISEASE", r"(?i)(?<![\w-])(?:covid|ковид)-19|(?<![\w-])sars-cov-2(?![\w-])"),
    ("DISEASE", rf"(?i)(?<![\w-])(?:{_stems(_DISEASE_STEMS)})[а-яё]*(?![\w-])"),
]
_COMPILED = [(typ, re.compile(rx)) for typ, rx in _RU_PATTERNS]


def russian_patterns(s: str) -> list[tuple[int, int, str]]:
    """(start, end, type) of the pattern layer's mentions in Russian sentence `s`, first
    pattern first where two overlap."""
    out: list[tuple[int, int, str]] = []
    for typ, rx in _COMPILED:
        for m in rx.finditer(s.replace("ё", "е")):
            a, b = m.span()
            if not any(a < y and x < b for x, y, _ in out):
                out.append((a, b, typ))
    return out


def lemma(word: str) -> str:
    """A Russian word's dictionary form (pymorphy2's first parse, lower case): "журналиста" ->
    "журналист"; an acronym ("МВД") or a word in another script ("COVID-19") as written."""
    if word.isupper() or not CYRILLIC_WORD.search(word):
        return word
    parses = _models()[3].parse(word)
    return parses[0].normal_form if parses else word.lower()


CYRILLIC_WORD = re.compile(r"[а-яё]", re.IGNORECASE)
