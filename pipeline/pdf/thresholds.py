"""Every cut-off the PDF reader decides by, named once: what a font size ratio, a distance
in points, a share of characters or a count separates. Both parsing paths read the same
names, so a heading is "larger" by the same ratio on either. Origins: most were set by hand
in issue 11 (the structure parser, commits 2f6b9bb and ea4320b) on the PDFs of the structure
benchmark (`benchmarks/structure.py`: ../shared/data/pdfs and pdf-layout, docling's ground
truth); where no measurement was recorded the comment says so. Values a user may tune are
`StructureSettings` fields instead (margins, repeat share, heading words, footnote zone)."""

from __future__ import annotations

# --- font sizes, as ratios to the body text (or to a neighbour) ---------------------------
# A line at least this much larger than the body text (or than the lines around it) is set
# as a heading: both paths, and OCR'd pages' headings. Set by hand in issue 11.
HEADING_RATIO = 1.15
# A heading (or a chapter number standing alone) this much larger than the body text is the
# document's title on page 1 / a chapter number, not body text. Set by hand in issue 11.
TITLE_RATIO = 1.5
# A number alone the layout model classed a heading is a chapter number at this ratio; on
# the rule path at CHAPTER_NUMBER_RATIO. Set by hand in issue 11.
CLASSED_CHAPTER_RATIO = 1.5
CHAPTER_NUMBER_RATIO = 2
# A caption label followed by lower case is still a caption when set this much smaller
# than the body text (or bold). Set by hand in issue 11.
CAPTION_SMALL_RATIO = 0.95
# Footnote text is set at most this share of the body size: larger is body text, not a note.
# Set by hand in issue 11 (10 pt notes under 11 pt text pass; 9/10 pt is 0.9).
NOTE_RATIO = 0.92
# A bold line at least this share of the body size can be a heading (bold body-size run-in
# headings); smaller bold text is a label. Set by hand in issue 11.
BOLD_HEADING_RATIO = 0.95
# A line this much larger than the line under it, and not below NEIGHBOUR_BODY_RATIO of the
# body size, is a heading over its paragraph. Set by hand in issue 11.
OVER_NEXT_RATIO = 1.2
NEIGHBOUR_BODY_RATIO = 0.9
# Two blocks whose font sizes differ by this ratio or more are different blocks (a heading
# over its paragraph). Set by hand (a3ed03c moved it; no measurement recorded).
BLOCK_SIZE_RATIO = 1.12
# A heading is at most this far (in its own sizes) over the line under it.
HEADING_GAP_RATIO = 1.2
# A span below this share of its line's size (or raised by MARKER_RAISE of it) is a
# superscript note marker. Set by hand in issue 11.
MARKER_RATIO = 0.8
MARKER_RAISE = 0.2
# A paragraph at least this share of the size of the one before it continues it (the same
# font, not a chart label). Set by hand in issue 11.
SAME_FONT_RATIO = 0.9
# Body size assumed where a page has no text to measure (points, a common body size).
DEFAULT_BODY_SIZE = 10.0

# --- shares of characters -----------------------------------------------------------------
# A unit with more than this share of bold characters is bold. Set by hand in issue 11.
BOLD_SHARE = 0.9
# Two lines are of one weight when both are (or both are not) over half bold; a heading
# stands out from neighbours under this share bold.
HALF_BOLD = 0.5
# Over this share of characters in a math font: an equation, not a heading or a sentence.
MATH_SHARE = 0.3
# Over this share in a math font (and under FORMULA_MAX_CHARS): a formula on the rule path.
FORMULA_MATH_SHARE = 0.4
FORMULA_MAX_CHARS = 300
# Over half of a line's letters right-to-left: the line reads right to left.
RTL_SHARE = 0.5
# Over half of a document's characters monospaced: typewritten, no listings in it.
TYPEWRITTEN_SHARE = 0.5
# A list item entirely monospaced (rounding allowed) is a listing's line.
ALL_MONO = 0.999
# At most this share of digits among its characters: prose, not a chart's labels.
PROSE_MAX_DIGITS = 0.2
# At least this share of a page's characters on horizontal lines: the page is upright (else
# set sideways, its text all kept).
UPRIGHT_SHARE = 0.5
# Over this share of body-size text: a first or last page is no cover. Set by hand in issue
# 11 on the shared PDFs' covers (redp5110).
COVER_BODY_SHARE = 0.3

# --- distances in points ------------------------------------------------------------------
# XY-cut reading order: a vertical gap of this share of the body size (at least
# XY_MIN_VGAP points) or a horizontal gap of XY_MIN_HGAP points cuts a band. Set by hand in
# issue 11; the OCR and orphan-line paths use the floor alone.
XY_VGAP_RATIO = 0.8
XY_MIN_VGAP = 6.0
XY_MIN_HGAP = 0.5
# A unit further right than this from its column's left edge, and off its centre by more
# than OFF_CENTRE, is inside a figure or a table: no heading. Set by hand in issue 11.
INDENT = 6
OFF_CENTRE = 20
# A multi-line unit within this many points vertically counts toward a unit's column.
COLUMN_NEAR = 60
# A running header/footer's number is at most this much larger than the body text.
PAGE_NUMBER_SIZE_SLACK = 0.5
# A cover's body-size text is within this many points of the body size.
COVER_SIZE_SLACK = 0.6
# A display line over running text: left edges within this many points.
COVER_ALIGN = 3
# Wrapped heading lines: left edges within HEADING_ALIGN points (or centres within
# HEADING_CENTRE: the sum of edges), sizes within HEADING_SIZE_SLACK, the gap at most
# HEADING_WRAP_GAP of the size. Set by hand in issue 11 (the layout path).
HEADING_ALIGN = 3
HEADING_CENTRE = 6
HEADING_SIZE_SLACK = 0.5
HEADING_WRAP_GAP = 0.8
# A note continued in the next column starts no higher than this above the notes' top.
NOTE_TOP_SLACK = 2
# An image block over this area (square points) is a figure; smaller ones are decoration.
MIN_FIGURE_AREA = 400
# Two lines are on one row when their baselines differ by under this share of the height.
SAME_ROW = 0.5
# A marker within this share of the line's height above it (and its centre no lower than
# MARKER_LOW of the height under the line's centre) belongs to the line.
MARKER_ABOVE = 0.5
MARKER_LOW = 0.05
# A marker is within this share of the line's size of the line's end.
MARKER_REACH = 0.5
# A gap over this share of the previous line's size starts a new block (a paragraph break).
BLOCK_GAP_RATIO = 1.2
# Two regions touching within this many points are one figure drawn in pieces.
TOUCH_GAP = 2.0
# A gutter under this share of the page width is too narrow to cut a region at.
MIN_GUTTER_SHARE = 0.05
# A link's target box is the first one below this many points over the target point, within
# LINK_COLUMN_SLACK points of its column.
LINK_ABOVE = 2
LINK_COLUMN_SLACK = 5
# Captions and figures: a box beside another (no shared x-range) is this far away more;
# a caption more than CAPTION_MAX_GAP points from its figure or table is not its caption;
# one of the wrong kind counts this much further. Set by hand in issue 11.
SIDE_PENALTY = 100
WRONG_KIND_PENALTY = 50
CAPTION_MAX_GAP = 150
# A bibliography entry starts within this many points of the list's left edge.
BIB_INDENT = 2
# Lines whose direction is within these of (1, 0) are horizontal.
HORIZONTAL_DX = 0.98
HORIZONTAL_DY = 0.1
# A line sloping more than this is no title line (the loader's title).
TITLE_MAX_SLOPE = 0.01
# Title lines: within this many points of the largest size, the next one no further than
# TITLE_LINE_GAP of it below; spans closer than TITLE_SPACE of the size are one word.
TITLE_SIZE_SLACK = 0.5
TITLE_LINE_GAP = 1.2
TITLE_SPACE = 0.15
# A drawn bullet: a shape about square (sides within this share) and near the text's colour
# (channels within BULLET_COLOUR of 255); edges within BULLET_EDGE points.
BULLET_SQUARE = 0.25
BULLET_COLOUR = 26
BULLET_EDGE = 0.5
# Right-to-left ligature: a zero-width glyph (under RTL_ZERO_WIDTH) at the next glyph's edge
# (within RTL_EDGE).
RTL_ZERO_WIDTH = 0.01
RTL_EDGE = 0.5
# OCR'd lines on one row: centres within this share of the height; a line up to this share
# above the previous one's foot still joins its block.
OCR_ROW = 0.4
OCR_OVERLAP = 0.3
# Listings: glyph advances differing by under this (em) are one monospaced width; a line
# step over LISTING_MIN_STEP of the size is a line, the pitch at most LISTING_MAX_PITCH
# of it (else LISTING_PITCH is assumed); at most LISTING_MAX_BLANKS blank lines kept.
MONO_SPREAD = 0.02
LISTING_MIN_STEP = 0.5
LISTING_MAX_PITCH = 1.8
LISTING_PITCH = 1.2
LISTING_MAX_BLANKS = 2
LISTING_ROW = 0.5

# --- counts -------------------------------------------------------------------------------
# A heading is at most this many lines (rule path); OCR'd and layout headings at most
# SHORT_HEADING_LINES; headings without a larger size at most BOLD_HEADING_WORDS words,
# under a step in size at most STEP_HEADING_WORDS. Set by hand in issue 11.
HEADING_MAX_LINES = 4
SHORT_HEADING_WORDS = 12
SHORT_HEADING_LINES = 2
BOLD_HEADING_WORDS = 12
STEP_HEADING_WORDS = 10
# A chapter number alone is at most this many characters.
CHAPTER_NUMBER_CHARS = 3
# The layout path's class-led headings: at most this many words (the default).
LIST_HEADING_WORDS = 20
# A running header/footer is at most this many lines; one with a page number at most
# MARGIN_NUMBER_WORDS words.
MARGIN_MAX_LINES = 2
# The layout path's running text in the margin bands: at most this many lines.
LAYOUT_MARGIN_LINES = 3
MARGIN_NUMBER_WORDS = 15
# Margin text on at least this many pages repeats (with the settings' share).
MIN_REPEAT_PAGES = 2
# A page number is at most this many digits, a roman one at most ROMAN_CHARS letters.
PAGE_NUMBER_DIGITS = 4
ROMAN_CHARS = 5
# Cover headings and display lines over text have at least this many words; the text under
# them at least COVER_TEXT_LINES lines, within COVER_TEXT_GAP sizes of them.
COVER_HEADING_WORDS = 3
COVER_TEXT_LINES = 3
COVER_TEXT_GAP = 2
# A marker text over this many characters is no note marker.
MARKER_MAX_CHARS = 3
# An outline with this many levels has chapters at its first level.
CHAPTER_LEVELS = 3
# Heading text and a paragraph's text match by suffix when longer than this.
MIN_MATCH_CHARS = 3
# A citation range ("12-15") spans fewer than this many numbers.
MAX_CITATION_RANGE = 50
# Under this many glyph advances a font's width says nothing (listings).
MIN_ADVANCES = 3
# A text layer with this many characters or more can be judged unreadable.
MIN_UNREADABLE_CHARS = 20
# The loader's title: at least this many letters; a first line of this many words running
# on in lower case is a sentence, no title.
TITLE_MIN_LETTERS = 3
SENTENCE_WORDS = 8

# === set in their own sessions (comments as they were), moved here from their modules ===

# --- Outline (build/sections) --------------------------------------------------------------
# The outline replaces the detected headings only when it names at least this share of them.
OUTLINE_COVERS = 0.6

# --- Regions cut at a gutter (layout/gutters; session 14, benchmarks/columns.py) -----------
GUTTER = 4.0  # points of blank between two columns, at least
GUTTER_MIN_ROWS = 3  # rows of text on each side of a gutter, at least
GUTTER_FULL = 0.7  # share of its side's width a full row fills
GUTTER_FULL_ROWS = 0.5  # share of a side's rows that are full, at least
GUTTER_WIDE = 6  # line heights a side of prose spans, at least (not a table's one-word cells)
GUTTER_MIN_SIDE = 0.5  # share of the widest side's width a column spans, at least
GUTTER_ALIGNED = 3.0  # points two regions' left and right edges may differ in one column

# --- Columns read as columns (layout/stripes; session 14, benchmarks/columns.py) -----------
STRIPE_GAP = 3.0  # points between two columns, at least (pymupdf4llm's own test for columns)
STRIPE_FULL = 0.7  # share of its column's width the widest region of a stripe's column fills
STRIPE_INDENT = 0.05  # or starts this share of its column's width from the column's left edge
STRIPE_MIN_COLUMN = 0.2  # share of the body's width a column spans, at least
STRIPE_GOES_ON = 40.0  # points from a column's foot to a region in it below a blank band, at most

# --- Running text (layout/page_numbers) ----------------------------------------------------
RUNNING_PAGES = 3  # the same margin text at the same place on this many pages runs

# --- Margin regions (layout/parse_layout) --------------------------------------------------
# A page-header/footer region that is a sentence (this many words or more, ending like one)
# and that no other page repeats (digits aside) is content the model put in a margin.
MARGIN_CONTENT_WORDS = 5

# --- Drawn bullets (read/bullets) ----------------------------------------------------------
BULLET_SIZE = (1.5, 8.0)  # a bullet's width and height in points
BULLET_GAP = 2.5  # at most this many font sizes between a bullet and its text

# --- Listings (read/listings) --------------------------------------------------------------
CODE_SHARE = 0.8  # a paragraph with at least this share of monospaced characters is code

# --- Unreadable text layers (read/ocr_engine) ----------------------------------------------
# A text layer of which this share of the characters are no text (U+FFFD, control or
# private-use characters: the glyph ids a font without a Unicode map gives, "5IF\x01IBSCPVS"
# for "The harbour") is read by OCR like a scan. Real pages stay far below: the worst of the
# shared and unseen PDFs is 2.1% (Wingdings bullets), a LaTeX paper's math fonts 0.2%.
UNREADABLE_SHARE = 0.1

# --- Scans and OCR (read/ocr_engine) -------------------------------------------------------
# Share of the page that images/drawings must cover for a text-less page to be a scan.
SCAN_MIN_COVER = 0.25
# Recognised lines less sure than this are dropped: the engine's default 0.5 kept the bars
# of a chart read as "--l" (0.54-0.58); the words of our test scans score 0.95 and more.
OCR_MIN_SCORE = 0.65

# --- OCR'd lines (read/ocr_units) ----------------------------------------------------------
# A line's font size from its width: Latin text averages about half an em a character,
# whatever letters the line holds; its box height (ascenders, descenders, the detector's
# margin) varies by a third between "same." and "percent while staff". Short lines are
# measured by height (box height / font size ~ BOX_PER_POINT).
EM_PER_CHAR = 0.5
OCR_MIN_CHARS = 8
BOX_PER_POINT = 1.3
# Lines from 35% below to 20% above the page's median estimate are body size (words the
# recogniser ran together make a line look ~15% larger); headings ~1.3x the body or more
# keep their own size.
OCR_SAME_SIZE = (0.35, 0.2)
# Boxes on one row closer than this many box heights are one line (the detector cut it at a
# wide space); a two-column paper's gutter (~17 pt at 10 pt text) left ~1 box height
# between the expanded boxes, and a join there interleaved the columns' sentences.
OCR_ROW_GAP = 0.5

# --- The loader's title (read/title) -------------------------------------------------------
# A joined title longer than this is no title; a first line longer than
# MAX_FIRST_LINE_CHARS is a sentence. Chosen by hand (no measurement recorded).
MAX_TITLE_CHARS = 200
MAX_FIRST_LINE_CHARS = 120
# display type at least this much larger than the body (an ACL paper's 15 pt over 11 pt)
DISPLAY_TITLE_RATIO = 1.25
# characters in the largest type up to which a page whose text is mostly that type is a
# cover (a title slide: two lines of title over an author line)
COVER_CHARS = 200
