"""Writes geo-test.mmdb, the MaxMind-format fixture of the geolocation tests (GeoIP2-City
shaped records for documentation networks). Regenerate: pip install mmdb-writer; python3 this."""
from pathlib import Path

from mmdb_writer import MMDBWriter
from netaddr import IPSet

w = MMDBWriter(ip_version=6, database_type="GeoIP2-City", ipv4_compatible=True)
w.insert_network(IPSet(["203.0.113.0/24"]), {
    "country": {"iso_code": "JP"},
    "location": {"latitude": 35.68, "longitude": 139.69},
})
w.insert_network(IPSet(["198.51.100.0/25"]), {"country": {"iso_code": "BR"}})
w.insert_network(IPSet(["2001:db8:42::/48"]), {
    "country": {"iso_code": "DE"},
    "location": {"latitude": 50.11, "longitude": 8.68},
})
w.to_db_file(str(Path(__file__).with_name("geo-test.mmdb")))
