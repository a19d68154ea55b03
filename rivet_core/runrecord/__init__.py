"""The run record: what one run did (`summary.py`, `RunSummary`) and its event log
(`journal.py`, `RunJournal`). Below the runners, the table commit and the reports, which
all read and write it, so every arrow to it points down."""
