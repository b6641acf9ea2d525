-- create_outcomes_view.sql
-- What: the three outcome tables as one, with an `outcome` column.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
create or replace view identifier(:view) as
with completed_trees as (
    select 'completed' as outcome, * from completed
),

failed_trees as (
    select 'failed' as outcome, * from failed
),

expired_trees as (
    select 'expired' as outcome, * from expired
),

final as (
    select * from completed_trees
    union all
    select * from failed_trees
    union all
    select * from expired_trees
)

select * from final
