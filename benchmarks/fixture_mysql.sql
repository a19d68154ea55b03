-- Benchmark fixture for MariaDB (benchmarks/): the same two shapes as fixture_pg.sql, generated
-- server-side with the Sequence engine (seq_1_to_N); the harness runs the INSERTs in slices
-- of ids (@lo/@hi placeholders {lo} {hi}) so no single statement holds millions of rows of undo.
-- {{CREATE}}
DROP TABLE IF EXISTS orders;
CREATE TABLE orders (
    id          BIGINT        NOT NULL PRIMARY KEY,
    customer_id INT           NOT NULL,
    status      VARCHAR(16)   NOT NULL,
    amount      DECIMAL(12,2) NOT NULL,
    discount    DOUBLE        NULL,
    note        TEXT          NOT NULL,
    created_at  TIMESTAMP(6)  NOT NULL,
    updated_at  DATETIME(6)   NOT NULL,
    is_paid     BOOLEAN       NOT NULL,
    payload     JSON          NOT NULL,
    ext_id      CHAR(36) CHARACTER SET ascii NOT NULL
) ENGINE=InnoDB;
DROP TABLE IF EXISTS narrow;
CREATE TABLE narrow (
    id BIGINT      NOT NULL PRIMARY KEY,
    k  INT         NOT NULL,
    v  DOUBLE      NULL,
    t  DATETIME(6) NOT NULL
) ENGINE=InnoDB;
-- {{ORDERS}}
INSERT INTO orders
SELECT seq,
       1 + CRC32(CONCAT('c', seq)) % 200000,
       ELT(1 + CRC32(CONCAT('s', seq)) % 7, 'new','pending','paid','shipped','delivered','cancelled','refunded'),
       ROUND((CRC32(CONCAT('a', seq)) % 5000000) / 100, 2),
       IF(seq % 5 = 0, NULL, (CRC32(CONCAT('d', seq)) % 3000) / 10000),
       LEFT(REPEAT(CONCAT('Customer asked: ', MD5(seq), ' deliver after ', seq % 24, 'h. '), 4),
            CRC32(CONCAT('n', seq)) % 201),
       FROM_UNIXTIME(1609459200 + seq * 6) + INTERVAL (CRC32(CONCAT('u', seq)) % 1000000) MICROSECOND,
       FROM_UNIXTIME(1609459200 + seq * 6 + CRC32(CONCAT('v', seq)) % 2592000),
       CRC32(CONCAT('p', seq)) % 10 < 7,
       JSON_OBJECT('sku', CONCAT('SKU-', LPAD(CRC32(CONCAT('k', seq)) % 50000, 5, '0')),
                   'qty', 1 + CRC32(CONCAT('q', seq)) % 9,
                   'channel', ELT(1 + CRC32(CONCAT('h', seq)) % 3, 'web', 'app', 'store'),
                   'gift', IF(CRC32(CONCAT('g', seq)) % 10 = 0, TRUE, FALSE)),
       LOWER(CONCAT_WS('-', SUBSTR(MD5(CONCAT(seq, ':ext')), 1, 8), SUBSTR(MD5(CONCAT(seq, ':ext')), 9, 4),
                       SUBSTR(MD5(CONCAT(seq, ':ext')), 13, 4), SUBSTR(MD5(CONCAT(seq, ':ext')), 17, 4),
                       SUBSTR(MD5(CONCAT(seq, ':ext')), 21, 12)))
FROM seq_{lo}_to_{hi};
-- {{NARROW}}
INSERT INTO narrow
SELECT seq, CRC32(CONCAT('k', seq)) % 1000000,
       IF(seq % 10 = 0, NULL, (CRC32(CONCAT('v', seq)) % 1000000) / 1000),
       TIMESTAMP('2021-01-01') + INTERVAL seq SECOND
FROM seq_{lo}_to_{hi};
