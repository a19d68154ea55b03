"""The generic source through SQLAlchemy: any database whose dialect is installed
(docs/sqlalchemy.md). `session` reads, `types` maps SQLAlchemy types to Arrow, `dialect`
answers the catalog questions through SQLAlchemy's inspector."""
