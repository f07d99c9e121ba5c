"""The built-in pruning engine: which lines of a text matter for a question.

CPU only, offline, deterministic. Texts are cut into units (functions and
classes, log records, document sections), the units are ranked against the
question with BM25F, and the best ones are kept whole with what encloses them.
"""

from ._matches import is_file_listing, is_search_output
from ._select import PruneTimeout, Selection, hidden_unit_name, select_lines
from ._sniff import guess_source_type, without_line_numbers
from ._text import is_word_char, query_terms, terms
from ._units import Around

__all__ = [
    "Around",
    "PruneTimeout",
    "Selection",
    "guess_source_type",
    "hidden_unit_name",
    "is_file_listing",
    "is_search_output",
    "is_word_char",
    "query_terms",
    "select_lines",
    "terms",
    "without_line_numbers",
]
