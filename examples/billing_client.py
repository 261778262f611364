"""How a billing system reads cardhour: through a client generated from the committed OpenAPI document.

Generate the client, then run this against a server:

    bash scripts/contract-venv.sh    # openapi-python-client and friends, pinned
    .cardhour/contract-venv/bin/openapi-python-client generate --path openapi/openapi.json \
        --output-path /tmp/cardhour-client/cardhour_client --meta none
    PYTHONPATH=/tmp/cardhour-client .cardhour/contract-venv/bin/python examples/billing_client.py \
        http://127.0.0.1:8080 "$CARDHOUR_TOKEN" 2026-10 vision 2026-10-01T00:00:00Z 2026-11-01T00:00:00Z

It reads a month's bill and one team's statement, the month's usage per team, walks the audit log page by page
(following `Link: <…>; rel="next"`), creates a rate and sees the 409 a duplicate gets. Every figure is printed as
`key=value`, one a line (tests/api_contract.rs compares them with the API's own answers).
"""

import datetime
import sys
from urllib.parse import parse_qs, urlparse

from cardhour_client import AuthenticatedClient
from cardhour_client.api.audit import list_audit
from cardhour_client.api.bills import get_month, get_team_statement
from cardhour_client.api.rates import create_rate
from cardhour_client.api.usage import get_usage
from cardhour_client.models import GroupBy, RateInput
from cardhour_client.types import UNSET


def next_cursor(response):
    """The `after` of the next page, from the `Link` header; None on the last page."""
    link = response.headers.get("link")
    if not link:
        return None
    target = link.split(";")[0].strip().strip("<>")
    return parse_qs(urlparse(target).query)["after"][0]


def main(base_url, token, month, team, start, end):
    client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)

    bill = get_month.sync(client=client, month=month)
    print(f"bill.status={bill.status.value}")
    print(f"bill.capacity_cost={bill.capacity_cost}")
    for summary in bill.teams:
        print(f"bill.team.{summary.team}.total={summary.total}")

    statement = get_team_statement.sync(client=client, month=month, team=team)
    print(f"statement.total={statement.total}")
    print(f"statement.lines={len(statement.lines)}")

    rows = get_usage.sync(
        client=client,
        from_=datetime.datetime.fromisoformat(start),
        to=datetime.datetime.fromisoformat(end),
        group_by=GroupBy.TEAM,
    )
    for row in rows:
        print(f"usage.{row.team}.gpu_hours={row.gpu_hours}")

    ids, after = [], UNSET
    while True:
        page = list_audit.sync_detailed(client=client, limit=2, after=after)
        ids += [entry.id for entry in page.parsed]
        after = next_cursor(page)
        if after is None:
            break
    print(f"audit.ids={','.join(str(i) for i in ids)}")

    rate = RateInput(gpu_model="H100-80GB", effective_from=datetime.date(2026, 12, 1), rate="30.5")
    created = create_rate.sync_detailed(client=client, body=rate)
    print(f"rate.created.status={created.status_code.value}")
    print(f"rate.created.rate={created.parsed.rate}")
    duplicate = create_rate.sync_detailed(client=client, body=rate)
    print(f"rate.duplicate.status={duplicate.status_code.value}")
    print(f"rate.duplicate.field={duplicate.parsed.field}")


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    main(*sys.argv[1:])
