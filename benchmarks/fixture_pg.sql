-- Benchmark fixture for PostgreSQL (benchmarks/, after ../shared/bench/fixture.sql).
-- Usage: psql -v rows=5000000 -v narrow_rows=10000000 -f fixture_pg.sql   (deterministic)
--   orders: the wide 11-column shape of issue 5 (~300 B/row, 5 M rows ≈ 1.5 GB)
--   narrow: 4 columns (bigint, int, double, timestamp), 10 M rows by default
\set ON_ERROR_STOP on
SELECT (:rows * 1.06 + 1000)::bigint AS maxg \gset

DROP TABLE IF EXISTS orders;
CREATE TABLE orders (
    id          bigint           NOT NULL,  -- sequential, ~5% gaps
    customer_id integer          NOT NULL,
    status      text             NOT NULL,  -- 7 distinct values
    amount      numeric(12,2)    NOT NULL,
    discount    double precision,           -- ~20% NULL
    note        text             NOT NULL,  -- 0..200 chars ('' included)
    created_at  timestamptz      NOT NULL,  -- microsecond precision
    updated_at  timestamp        NOT NULL,
    is_paid     boolean          NOT NULL,
    payload     jsonb            NOT NULL,  -- small object
    ext_id      uuid             NOT NULL
);

INSERT INTO orders
SELECT s.g,
       1 + (h.h1 % 200000)::int,
       (ARRAY['new','pending','paid','shipped','delivered','cancelled','refunded'])[1 + ((h.h1 >> 20) % 7)::int],
       round(((h.h2 % 5000000) / 100.0)::numeric, 2),
       CASE WHEN h.h3 % 5 = 0 THEN NULL ELSE ((h.h3 >> 8) % 3000) / 10000.0 END,
       left(repeat('Customer asked: ' || md5(s.g::text) || ' deliver after ' || (h.h1 % 24) || 'h. ', 4),
            ((h.h4 % 201))::int),
       timestamptz '2021-01-01 00:00:00+00' + s.g * interval '6 seconds'
           + ((h.h4 >> 10) % 1000000) * interval '1 microsecond',
       (timestamptz '2021-01-01 00:00:00+00' + s.g * interval '6 seconds') AT TIME ZONE 'UTC'
           + ((h.h5 % 2592000)) * interval '1 second',
       (h.h5 >> 24) % 10 < 7,
       jsonb_build_object('sku', 'SKU-' || lpad(((h.h2 >> 24) % 50000)::text, 5, '0'),
                          'qty', 1 + ((h.h3 >> 20) % 9),
                          'channel', (ARRAY['web','app','store'])[1 + ((h.h5 >> 40) % 3)::int],
                          'gift', (h.h4 >> 40) % 10 = 0),
       md5(s.g::text || ':ext')::uuid
FROM (SELECT g FROM generate_series(1, :maxg) AS g
      WHERE (hashint8extended(g, 0) & 1023) >= 51      -- drop ~5% of ids
      LIMIT :rows) AS s
CROSS JOIN LATERAL (
    SELECT hashint8extended(s.g, 1) & 9223372036854775807 AS h1,
           hashint8extended(s.g, 2) & 9223372036854775807 AS h2,
           hashint8extended(s.g, 3) & 9223372036854775807 AS h3,
           hashint8extended(s.g, 4) & 9223372036854775807 AS h4,
           hashint8extended(s.g, 5) & 9223372036854775807 AS h5
) AS h;
ALTER TABLE orders ADD PRIMARY KEY (id);

DROP TABLE IF EXISTS narrow;
CREATE TABLE narrow (
    id bigint           NOT NULL,
    k  integer          NOT NULL,
    v  double precision,            -- 10% NULL
    t  timestamp        NOT NULL
);
INSERT INTO narrow
SELECT g, ((hashint8extended(g, 7) & 2147483647) % 1000000)::int,
       CASE WHEN g % 10 = 0 THEN NULL ELSE ((hashint8extended(g, 8) & 2147483647) % 1000000) / 1000.0 END,
       timestamp '2021-01-01' + g * interval '1 second'
FROM generate_series(1, :narrow_rows) AS g;
ALTER TABLE narrow ADD PRIMARY KEY (id);

VACUUM (FREEZE, ANALYZE) orders;
VACUUM (FREEZE, ANALYZE) narrow;
CHECKPOINT;
