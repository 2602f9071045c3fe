"""The incremental merge: after a run that changed a few shards, only the entity and
relationship rows the change touched are merged again (by `merge_graph` itself, over the
mentions they depend on); every other row is the base version's
(pipeline.graph.merge_splice puts them together).

Why it is exact. An entity row of key k is a function of k's mentions (title, aliases, type,
frequency, text units, evidence), the homes of its units, its degree, and the `centrality`
of its evidence sentences (how many keys, over the corpus, a sentence is evidence of); a
relationship row of its mentions, its ends' titles and degrees. The keys and relationships
whose own mentions or homes changed are found by comparing the shards that ran
(pipeline.graph.touched). Their rows are merged again from:

- every mention of those keys and relationships: read from the units the base version lists
  for them (text_unit_ids) and from the shards that ran;
- every entity mention, anywhere, whose sentence is evidence of one of them: so that the
  merge counts each sentence's centrality over the whole corpus (a sentence repeated in
  other documents has mentions outside those units);
- the other end's title, as the base version has it, for a relationship with an end that
  is not merged again (`merge_graph`'s given_titles).

What their change reaches beyond them is followed until nothing more is reached: a key that
keeps no entity mention is titled by its relation ends, so all its relationships are merged
again; a sentence whose centrality changed changes the rows of every key it is evidence
of; a key whose title changed, the rows of its relationships (their source/target and
description head). Degrees come from the spliced relationships, so they need no mentions.

A text unit an edit renamed (its text changed, so its id did) is compared as the unit it
replaced at the same place (pipeline.graph.touched): the keys and relationships whose
mentions there are the same are not merged again but take the base's rows with the new
unit id in their lists (`touched.moved_rows`), unless the changes above reach them. Merging
them again would read every mention of a hub the unit names (1,409 units at 40k
documents) for a row whose only change is one id in its list.

When the rows to merge again pass `max_share` of the corpus' (counted as the base version
counts them: their text units, `_Sizes`), or the base version cannot be used, the
caller merges everything instead (`recompute` returns why). Their units may still be most
of the corpus' (a hub is in 10k of 45k units at 40k documents, and 100 new documents name
every hub): past READ_ALL_SHARE every mention is then read at once, unfiltered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from pipeline.config import GraphSettings
from pipeline.graph.encode_mentions import CENTRALITY
from pipeline.graph.mention_tables import (
    MENTION_COLUMNS,
    no_matching,
    read_matching,
    read_mentions,
)
from pipeline.graph.merge import merge_graph
from pipeline.graph.titles import unit_titles
from pipeline.graph.touched import (
    KeyCache,
    Touched,
    entity_ids,
    held_moved,
    moved_rows,
    touched,
    with_ends,
    with_keys,
)
from pipeline.storage import store
from pipeline.storage.run_changes import RunChanges

ENTITY_COLUMNS = MENTION_COLUMNS["extracted_entities"]
RELATION_COLUMNS = MENTION_COLUMNS["extracted_relationships"]
# Text units to read, as a share of the corpus', past which every mention is read at once:
# a shard's rows filtered on a unit list of tens of thousands cost ~1.4x the same rows read
# unfiltered (100 new documents at 40k: 98 % of the units, 2.1 s filtered; the whole merge
# reads every mention in 1.5 s), so past about half the filter saves nothing.
READ_ALL_SHARE = 0.5


@dataclass(frozen=True)
class Recomputed:
    """The base version's tables and the rows merged again. `ids`/`rids`: the entity and
    relationship ids whose rows are replaced (a replaced id with no new row is gone);
    `entities`/`relationships`: their new rows (degrees not yet final); `mentions`: the
    entity and relation mentions they were merged from (what LLM summaries read);
    `units_read`: the text units whose mentions were read; `base`: the base version;
    `moved`: the rows (entities, relationships) whose mentions only moved to renamed units:
    the base's with their new unit ids (among `ids`/`rids`, not merged again)."""

    base: Path
    base_entities: pl.DataFrame
    base_relationships: pl.DataFrame
    ids: pl.Series
    rids: pl.Series
    entities: pl.DataFrame
    relationships: pl.DataFrame
    mentions: tuple[pl.DataFrame, pl.DataFrame]
    units_read: int
    moved: tuple[pl.DataFrame, pl.DataFrame]

    def with_moved(self) -> Recomputed:
        """The rows merged again and the moved ones (`touched.moved_rows`) as one."""
        ents, rels = self.moved
        return replace(
            self,
            entities=pl.concat([self.entities, ents.select(self.entities.columns)]),
            relationships=pl.concat([self.relationships, rels.select(self.relationships.columns)]),
            moved=(ents.clear(), rels.clear()),
        )


class _Mentions:
    """The run's mention rows read so far: entity mentions of the units and sentences asked
    for, relation mentions of the units asked for; `ran`: whether a row's shard ran."""

    def __init__(self, folder: Path, ran: frozenset[str]):
        self.folder, self.ran, self.keys = folder, ran, KeyCache()
        self.ee = with_keys(no_matching("extracted_entities")).with_columns(ran=pl.lit(False))
        self.er = with_ends(no_matching("extracted_relationships"))
        self.units: set[str] = set()
        self.relation_units: set[str] = set()
        self.sentences: set[str] = set()
        self.all_entities = self.all_relations = False  # every mention of the kind read

    def read(self, units: set[str], relation_units: set[str], sentences: set[str]) -> bool:
        """Read the entity mentions of `units` and `sentences`, the relation mentions of
        `relation_units`, not read yet; whether there were any."""
        # once every mention of a kind is read, nothing of it is read again
        new_u, new_d = (
            (set(), set())
            if self.all_entities
            else (units - self.units, sentences - self.sentences)
        )
        new_r = set() if self.all_relations else relation_units - self.relation_units
        unit, text = pl.col("text_unit_id"), pl.col("description")
        self._add(
            (_in(unit, new_u) | _in(text, new_d)) & ~self._read() if new_u or new_d else None,
            _in(unit, new_r) if new_r else None,
        )
        self.units |= new_u
        self.relation_units |= new_r
        self.sentences |= new_d
        return bool(new_u or new_d or new_r)

    def read_all(self, units: set[str], entities: bool, relations: bool) -> None:
        """Read every entity mention (`entities`) or relation mention (`relations`) not read
        yet; `units`: every text unit of the corpus."""
        entities &= not self.all_entities
        relations &= not self.all_relations
        self._add(
            ~self._read() if entities else None,
            ~_in(pl.col("text_unit_id"), self.relation_units) if relations else None,
        )
        if entities:
            self.units, self.all_entities = set(units), True
        if relations:
            self.relation_units, self.all_relations = set(units), True

    def _add(self, entities: pl.Expr | None, relations: pl.Expr | None) -> None:
        """Read the entity and relation mentions that match `entities` and `relations`."""
        if entities is not None:
            ee = read_matching(self.folder, "extracted_entities", entities)
            ee = with_keys(ee, self.keys).with_columns(ran=pl.col("shard").is_in(list(self.ran)))
            self.ee = pl.concat([self.ee, ee])
        if relations is not None:
            er = read_matching(self.folder, "extracted_relationships", relations)
            self.er = pl.concat([self.er, with_ends(er, self.keys)])

    def _read(self) -> pl.Expr:
        """Whether an entity mention row is read already."""
        return _in(pl.col("text_unit_id"), self.units) | _in(pl.col("description"), self.sentences)

    def sentences_of(self, keys: set[str]) -> set[str]:
        d = self.ee.filter(pl.col("key").is_in(list(keys))).get_column("description")
        return set(d.drop_nulls().to_list()) - {""}


def recompute(
    changes: RunChanges,
    chunks: pl.DataFrame,
    settings: GraphSettings,
    max_share: float,
) -> Recomputed | str:
    """The rows the run touched, merged again; or why the whole merge must run instead."""
    assert changes.base is not None and changes.whole is None
    base = changes.base
    missing = [
        t for t in ("entities", "relationships", "text_units") if not store.table_files(base, t)
    ]
    if missing:
        return f"the base version lacks {', '.join(missing)}"
    t = touched(changes)
    ents_b = store.read_table(base, "entities")
    rels_b = store.read_table(base, "relationships")
    m = _Mentions(changes.folder, frozenset(changes.shards))
    moved_keys, moved_rids = held_moved(t, ents_b, rels_b)
    keys = set(t.keys.to_list()) | (set(t.moved_keys.to_list()) - moved_keys)
    rids = set(t.rids.to_list()) | (set(t.moved_rids.to_list()) - moved_rids)
    changed, sentences = set(t.units.to_list()), set(t.sentences.to_list())
    present = set(chunks.get_column("id").to_list())
    sizes = _Sizes(ents_b, rels_b)
    # nothing to merge again when every touched row only moved (an edit to a sentence naming
    # no one): the mentions are then not read at all (a scan of every shard)
    ents, rels, xe, xr = ents_b.clear(), rels_b.clear(), m.ee.clear(), m.er.clear()
    while keys or rids:
        if (share := sizes.share(_ids(keys), rids)) > max_share:
            return (
                f"the touched rows are merged from {share:.0%} of the corpus' mentions "
                f"(their text units), above graph.incremental_merge_max_share ({max_share:g})"
            )
        units = _units_of(ents_b, _ids(keys)) | changed
        relation_units = _units_of(rels_b, rids) | changed
        most = READ_ALL_SHARE * max(len(present), 1)
        m.read_all(
            present | changed, len(units & present) > most, len(relation_units & present) > most
        )
        if m.read(units, relation_units, m.sentences_of(keys) | sentences):
            continue
        more_keys = _centrality_keys(m, t) - keys
        more_rids = _incident(rels_b, _ids(_without_mentions(m, keys))) - rids
        if more_keys or more_rids:
            keys |= more_keys
            rids |= more_rids
            continue
        ents, rels, xe, xr = _merge_part(m, keys, rids, ents_b, chunks, changes.folder, settings)
        flipped = _incident(rels_b, _flipped(ents, ents_b)) - rids
        if not flipped:
            break
        rids |= flipped
    moved = moved_rows(
        ents_b, rels_b, _ids(moved_keys - keys).values(), moved_rids - rids, t.renamed
    )
    return Recomputed(
        base=base,
        base_entities=ents_b,
        base_relationships=rels_b,
        ids=pl.Series("id", sorted(_ids(keys | moved_keys).values()), dtype=pl.Utf8),
        rids=pl.Series("id", sorted(rids | moved_rids), dtype=pl.Utf8),
        entities=ents,
        relationships=rels,
        mentions=(xe, xr),
        units_read=len(m.units | m.relation_units),
        moved=moved,
    )


def path_ordered_chunks(folder: str | Path) -> pl.DataFrame:
    """The text units of `folder` in path order, as one shard would hold them: what the
    merge does with them (numbering, ties broken by row order) does not depend on the shard
    count."""
    paths = store.read_table(folder, "documents", ["id", "source_path"])
    return (
        store.read_table(folder, "chunks")
        .join(paths, left_on="document_id", right_on="id", how="left", maintain_order="left")
        .sort("source_path", maintain_order=True)
        .drop("source_path")
    )


def merge_whole(
    folder: str | Path, chunks: pl.DataFrame, settings: GraphSettings
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, tuple[pl.DataFrame, pl.DataFrame]]:
    """Every mention of `folder` merged: (entities, relationships, text_units, the mentions)."""
    mentions = read_mentions(folder)
    homes = unit_titles(
        chunks.select("id", "document_id", "section_id", "seq"),
        store.read_table(folder, "documents", ["id", "title"]),
        store.read_table(folder, "sections", ["id", "path"]),
    )
    ents, rels, units = merge_graph(*mentions, chunks, settings, homes)
    return ents, rels, units, mentions


def _in(column: pl.Expr, values: set[str]) -> pl.Expr:
    """`column` is one of `values` (false for a null: a mention without a sentence)."""
    return column.is_in(list(values)).fill_null(False)


class _Sizes:
    """How many mentions a row is merged from, as the base version counts them: an entity's
    text units (`frequency`), a relationship's; new keys and relationships count nothing
    (their mentions are all in the shards that ran)."""

    def __init__(self, ents: pl.DataFrame, rels: pl.DataFrame):
        self.ents = ents.select("id", n=pl.col("frequency"))
        self.rels = rels.select("id", n=pl.col("text_unit_ids").list.len())
        self.total = max(int(self.ents["n"].sum() or 0) + int(self.rels["n"].sum() or 0), 1)

    def share(self, ids: dict[str, str], rids: set[str]) -> float:
        """The share of the corpus' mentions that entity ids `ids` and `rids` are merged from."""
        n = self.ents.filter(pl.col("id").is_in(list(ids.values())))["n"].sum() or 0
        n += self.rels.filter(pl.col("id").is_in(list(rids)))["n"].sum() or 0
        return n / self.total


def _ids(keys: set[str]) -> dict[str, str]:
    """key -> entity id."""
    frame = entity_ids(pl.Series("key", sorted(keys), dtype=pl.Utf8))
    return dict(frame.iter_rows())


def _units_of(table: pl.DataFrame, ids) -> set[str]:
    """The text units `table` (entities or relationships) lists for rows `ids`."""
    ids = list(ids.values()) if isinstance(ids, dict) else list(ids)
    rows = table.filter(pl.col("id").is_in(ids)).get_column("text_unit_ids")
    return set(rows.explode().drop_nulls().to_list())


def _incident(rels: pl.DataFrame, ids) -> set[str]:
    """Ids of the relationships of `rels` with an end in entity ids `ids`."""
    ids = list(ids.values()) if isinstance(ids, dict) else list(ids)
    if not ids:
        return set()
    end = pl.col("source_id").is_in(ids) | pl.col("target_id").is_in(ids)
    return set(rels.filter(end).get_column("id").to_list())


def _without_mentions(m: _Mentions, keys: set[str]) -> set[str]:
    """Keys with no entity mention left (all of a touched key's are read): the merge titles
    them by their relation ends, every relationship of theirs."""
    return keys - set(m.ee.get_column("key").to_list())


def _centrality_keys(m: _Mentions, t: Touched) -> set[str]:
    """Keys whose evidence holds a sentence shared by a changed mention whose count of keys
    (its centrality) changed: before, the rows of the shards that did not run and the base's
    of those that did; now, the run's."""
    sentences = list(t.sentences.to_list())
    text = pl.col("description").is_in(sentences)
    now = m.ee.filter(text)
    before = pl.concat(
        [
            now.filter(~pl.col("ran")).select("description", "key"),
            t.base_ee.filter(text).select("description", "key"),
        ]
    )

    def counts(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.group_by("description").agg(pl.col("key").n_unique().alias("n"))

    both = counts(now).join(counts(before), on="description", how="full", coalesce=True)
    changed = both.filter(pl.col("n").fill_null(0) != pl.col("n_right").fill_null(0))
    moved = now.filter(pl.col("description").is_in(changed.get_column("description").to_list()))
    return set(moved.get_column("key").to_list())


def _flipped(ents: pl.DataFrame, base: pl.DataFrame) -> set[str]:
    """Ids of entities whose title is not the base version's (new ones have no relationship
    in the base; gone ones have their relationships among the changed)."""
    joined = ents.select("id", "title").join(base.select("id", "title"), on="id", suffix="_base")
    return set(joined.filter(pl.col("title") != pl.col("title_base")).get_column("id").to_list())


def _merge_part(
    m: _Mentions,
    keys: set[str],
    rids: set[str],
    ents_b: pl.DataFrame,
    chunks: pl.DataFrame,
    folder: Path,
    settings: GraphSettings,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """`merge_graph` over the mentions of `keys` and `rids` (and the companions of their
    sentences): their rows, and the mentions merged (in read_mentions' order)."""
    order = ["shard", "row"]
    own = pl.col("key").is_in(list(keys))
    # every row of a sentence of theirs is read: how many keys it is evidence of, corpus-wide
    centrality = m.ee.group_by("description").agg(pl.col("key").n_unique().alias(CENTRALITY))
    xe = m.ee.filter(own).join(centrality, on="description", how="left").sort(order)
    xr = m.er.filter(pl.col("rid").is_in(list(rids))).sort(order)
    ends = set(xr.get_column("sk").to_list()) | set(xr.get_column("tk").to_list())
    given = (
        entity_ids(pl.Series("key", sorted(ends - keys), dtype=pl.Utf8))
        .join(ents_b.select("id", "title"), on="id")
        .select("key", "title")
    )
    units = xe.get_column("text_unit_id").unique()
    part = chunks.filter(pl.col("id").is_in(units.to_list()))
    homes = unit_titles(
        part.select("id", "document_id", "section_id", "seq"),
        _rows(folder, "documents", part.get_column("document_id"), ["id", "title"]),
        _rows(folder, "sections", part.get_column("section_id"), ["id", "path"]),
    )
    xe, xr = xe.select(*ENTITY_COLUMNS, CENTRALITY), xr.select(RELATION_COLUMNS)
    ents, rels, _ = merge_graph(xe, xr, chunks.clear(), settings, homes, given)
    ids = list(_ids(keys).values())
    ents = ents.filter(pl.col("id").is_in(ids))
    rels = rels.filter(pl.col("id").is_in(list(rids)))
    return ents, rels, xe, xr


def _rows(folder: Path, table: str, ids: pl.Series, columns: list[str]) -> pl.DataFrame:
    """Rows `ids` of sharded table `table`, `columns` only."""
    wanted = ids.drop_nulls().unique().to_list()
    return (
        store.scan_table(folder, table).select(columns).filter(pl.col("id").is_in(wanted)).collect()
    )
