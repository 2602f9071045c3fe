"""A PDF file in, its text out: the loaded document (page texts, title, metadata), TeX
fonts decoded, OCR of scanned pages, and each page's lines and units (blocks in XY-cut
reading order, bullets, listings, right-to-left text) that both parsing paths classify."""
