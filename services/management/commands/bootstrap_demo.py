from services.accounts import create_account, issue_token
from services.management.base import CredvaultCommand
from services.models import Account


class Command(CredvaultCommand):
    help = (
        "For `make run`: when the database holds no account yet, create the account `demo` and "
        "print one API token for it with a ready-to-paste curl line. Otherwise do nothing."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args, base_url: str, **options) -> None:
        if Account.objects.exists():
            self.stdout.write(
                "Accounts exist already; issue a token with: "
                ".venv/bin/python manage.py issue_token demo"
            )
        else:
            self.create_demo(base_url)
        self.stdout.write(
            "\nWhere to go next:\n"
            f"  the API's interactive docs:  {base_url}/api/docs\n"
            "  the walk-through:            README.md, 'From zero to an agent calling GitHub'\n"
            "  an agent calling a provider: make demo (offline, against a stand-in GitHub)\n"
        )

    def create_demo(self, base_url: str) -> None:
        account = create_account(name="demo")
        issued = issue_token(account=account, name="make run")
        self.stdout.write(
            "\nCreated the account 'demo'. Its API token, shown only this once:\n\n"
            f"  {issued.plaintext}\n\n"
            "Try it once the server is up:\n\n"
            f"  export TOKEN={issued.plaintext}\n"
            f'  curl -H "Authorization: Bearer $TOKEN" {base_url}/api/v1/services\n'
        )
