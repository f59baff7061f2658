-- Valid payments, one row per payment id.
with ranked as (
    select
        payment_id, order_id, customer_id, amount, method, status, event_time,
        to_timestamp(event_time / 1000.0) as paid_at,
        row_number() over (partition by payment_id order by _partition, _offset) as arrival
    from {{ source('lake', 'payments') }}
    where _valid
)
select payment_id, order_id, customer_id, amount, method, status, event_time, paid_at
from ranked
where arrival = 1
