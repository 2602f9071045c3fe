"""The lexical side of retrieval: a BM25 ranking beside the dense one.

A dense model blurs what BM25 matches exactly (rare words, names, numbers, codes), and reads
only the languages it was trained on; a word-count ranking with a stemmer per language reads
any corpus. `analysis` turns text into stemmed terms (per script: Cyrillic words through the
Russian stemmer, Latin words through the corpus language's), `bm25` builds, saves and scores
the index (the `bm25s` library), `fusion` mixes its scores with the dense cosine for the
query modes.
"""
