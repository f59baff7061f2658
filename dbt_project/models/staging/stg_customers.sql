-- The latest profile per customer (the compacted topic's current state).
with ranked as (
    select
        customer_id, name, tier, home_region, known_locations, credit_limit,
        row_number() over (partition by customer_id order by _offset desc, _partition) as recency
    from {{ source('lake', 'customers') }}
    where _valid
)
select customer_id, name, tier, home_region, known_locations, credit_limit
from ranked
where recency = 1
