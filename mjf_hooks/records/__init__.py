"""Job records: what each job was promised against what it used, at its end.

``job.py`` a record (SSS Job Object, APEL, JSON) and its summary row; ``store.py`` the
records directory's layout, writing whole records or handing them in (what an end hook
loads); ``reading.py`` every record, or each day's summary rows from its digest (`mjf
records`, `mjf metrics`); ``filing.py`` `mjf sync`'s part: hand-ins filed as root's, and
retention; ``report.py`` `mjf records` as a table, totals or JSON.
"""
