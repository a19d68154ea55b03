"""The zero-setup demo source: a SQLite shop database created on demand.

`ensure_demo_database(path)` creates `examples/demo/shop.db` with three tables —
customers (full export), orders (about 1 M rows with decimals, timestamps, JSON text and
NULLs; incremental on `updated_at`) and events (`created_at`/`updated_at` relative to
today, so the daily export always has recent days) — deterministically, so the demo and
the docs show the same numbers every time. `RIVET_DEMO_ORDERS` overrides the order count
(tests use a small one). Run `python -m rivet_core.ops.demo [--reset] [--add-orders N]`.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

#: The database the demo config (examples/demo/rivet.yaml: `sqlite:///shop.db`, relative to
#: the config) reads: the repository root is three levels above this file (rivet_core/ops/).
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "examples" / "demo" / "shop.db"
_STATUSES = ("new", "paid", "shipped", "delivered", "cancelled")


def _schema(conn: sqlite3.Connection) -> None:
    conn.executescript(
        """
        CREATE TABLE customers (
            id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, country TEXT,
            created_at TIMESTAMP NOT NULL);
        CREATE TABLE orders (
            id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
            status TEXT NOT NULL, amount DECIMAL(12,2) NOT NULL, discount DECIMAL(5,4),
            note TEXT, attributes JSON, created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL);
        CREATE INDEX orders_updated_at ON orders(updated_at);
        CREATE TABLE events (
            id INTEGER PRIMARY KEY, kind TEXT NOT NULL, payload JSON,
            created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL);
        CREATE INDEX events_created_at ON events(created_at);
        """
    )


def _ts(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f")


def add_orders(conn: sqlite3.Connection, n: int, *, seed: int = 7) -> None:
    rng = random.Random(seed + n)
    start = conn.execute("SELECT COALESCE(MAX(id), 0) FROM orders").fetchone()[0]
    customers = conn.execute("SELECT COUNT(*) FROM customers").fetchone()[0] or 1
    base = datetime(2026, 1, 1, tzinfo=UTC) if start == 0 else datetime.now(UTC)
    def row(i: int) -> tuple:
        created = base + timedelta(seconds=30 * (start + i))
        return (start + i + 1, rng.randint(1, customers), rng.choice(_STATUSES),
                f"{rng.randint(100, 9_999_999) / 100:.2f}",
                None if i % 5 else f"0.{rng.randint(0, 9999):04d}",
                rng.choice([None, "gift", "express", "it's fragile", "naïve café ☕"]),
                None if i % 7 == 0 else f'{{"channel": "{rng.choice(("web", "app", "store"))}", '
                                        f'"items": {rng.randint(1, 9)}}}',
                _ts(created), _ts(created + timedelta(minutes=rng.randint(0, 600))))
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (row(i) for i in range(n)))


def demo_order_count() -> int:
    return int(os.environ.get("RIVET_DEMO_ORDERS", "1000000"))


def ensure_demo_database(path: Path = DEFAULT_PATH, *, reset: bool = False) -> Path:
    """Create the demo database if it does not exist (or `reset`); return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if reset and path.exists():
        path.unlink()
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    rng = random.Random(42)
    with sqlite3.connect(tmp) as conn:
        _schema(conn)
        countries = ("DE", "FR", "US", "BR", "JP", "IN")
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?)", [
            (i, f"Customer {i}", None if i % 9 == 0 else f"c{i}@example.com", rng.choice(countries),
             _ts(datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=i))) for i in range(1, 201)])
        add_orders(conn, demo_order_count())
        now = datetime.now(UTC)
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", [
            (i, rng.choice(("login", "view", "purchase")), f'{{"session": {i % 97}}}',
             _ts(now - timedelta(minutes=15 * i)), _ts(now - timedelta(minutes=15 * i - 5)))
            for i in range(1, 14 * 96 + 1)])
    tmp.replace(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--reset", action="store_true", help="recreate the database")
    parser.add_argument("--add-orders", type=int, default=0, help="append N new orders")
    args = parser.parse_args()
    path = ensure_demo_database(args.path, reset=args.reset)
    if args.add_orders:
        with sqlite3.connect(path) as conn:
            add_orders(conn, args.add_orders)
    print(path)


if __name__ == "__main__":
    main()
