-- delete_held_slice.sql
-- What: removes the staged events of a slice once its micro-batch has committed
--       (the same rows as select_held_slice.sql with the same parameters).
-- Who runs it: pipelines.clock (the drain).
-- Parameters: as select_held_slice.sql.
delete from identifier(:held_events)
where {{include held_slice_rows}}
