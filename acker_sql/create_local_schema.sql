-- create_local_schema.sql
-- What: the schema (database) that holds the acker's tables, in a local warehouse folder.
-- Who runs it: `acker init` and every session start, when no catalog is configured.
-- Parameters: :schema, the schema name; {{location}}, its folder. Spark's grammar accepts no
--             parameter marker in LOCATION, so the loader renders that one as an escaped literal.
create schema if not exists identifier(:schema)
comment 'batch acker: XOR tuple-tree acker state and outcomes'
location {{location}}
