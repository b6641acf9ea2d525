-- create_schema.sql
-- What: the schema (database) that holds the acker's tables.
-- Who runs it: `acker init` and every session start.
-- Parameters: :schema, the qualified schema name.
create schema if not exists identifier(:schema)
comment 'batch acker: XOR tuple-tree acker state and outcomes'
