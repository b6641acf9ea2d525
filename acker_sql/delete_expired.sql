-- delete_expired.sql
-- What: removes the trees a tick expired, after their expired rows are written.
-- Who runs it: pipelines.engine.tick.
-- Parameters: :pending (table); :cutoff = new epoch - buckets.
delete from identifier(:pending) where epoch <= :cutoff
