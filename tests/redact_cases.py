"""Planted secrets and look-alikes: one table for the unit, end-to-end and bench checks.

Every secret is fake (made up for these tests, valid in shape only). Each
`PLANTED` row is (kind, line as it would appear in a tool result or a shell,
the secret value inside it). Each `LOOKALIKES` row is a string that must come
through redaction unchanged and stay searchable.
"""

from __future__ import annotations

__all__ = ["JWT", "LOOKALIKES", "OPENSSH_BLOCK", "PEM_BLOCK", "PLANTED"]

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJwbGFudGVkLXVzZXIiLCJpYXQiOjE3MTYyMzkwMjJ9"
    ".Xb7nqK2vT9cWm3LpR8sYd4FhG6jA1eZuN5oQwE0iBtU"
)

PEM_BLOCK = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo\n"
    "-----END RSA PRIVATE KEY-----"
)

OPENSSH_BLOCK = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBplantedq9Yw3KkDpUO2R1xVmM8hHc7aRZt0lNq5o3sXfwAAAJgAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

# (kind, context line, secret value)
PLANTED: list[tuple[str, str, str]] = [
    ("private-key", f"$ cat id_rsa\n{PEM_BLOCK}\n", PEM_BLOCK),
    ("private-key", f"$ cat ~/.ssh/id_ed25519\n{OPENSSH_BLOCK}\n", OPENSSH_BLOCK),
    ("jwt", f"> Authorization: Bearer {JWT}", JWT),
    ("aws-access-key", "export AWS_ACCESS_KEY_ID=AKIAQ3PLANTEDZX7WY4M", "AKIAQ3PLANTEDZX7WY4M"),
    (
        "aws-secret-key",
        "aws_secret_access_key = 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",
        "Zq8vN3pL2xR7tY5wK9mB4cF6hJ1gD0sA/PlantE+",
    ),
    (
        "gcp-api-key",
        'const firebaseConfig = { apiKey: "AIzaSyC4plantedQ9x2LmN7vB3kR8tW5yZ1cD0e" }',
        "AIzaSyC4plantedQ9x2LmN7vB3kR8tW5yZ1cD0e",
    ),
    (
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=plantedacct;AccountKey="
        + "k7Qp2Lx9" * 11
        + ";EndpointSuffix=core.windows.net",
        "k7Qp2Lx9" * 11,
    ),
    (
        "azure-client-secret",
        "AZURE_CLIENT_SECRET value: Abc8Q~pLaNtEd2x7Vq9Lm4Nb6Kj3Hg1Fd5Sa0Zx",
        "Abc8Q~pLaNtEd2x7Vq9Lm4Nb6Kj3Hg1Fd5Sa0Zx",
    ),
    (
        "github-token",
        "remote: git push https://x-access-token@github.com with GH_TOKEN ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J",
        "ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J",
    ),
    (
        "github-token",
        "token github_pat_11APLANTED0x9Qv2Lm7Nb3_k8Tr5Wy1Cz6Df0Gh2JpLaNtEdXx4Vq9Lm4Nb6Kj3Hg1Fd5Sa0ZxYw",
        "github_pat_11APLANTED0x9Qv2Lm7Nb3_k8Tr5Wy1Cz6Df0Gh2JpLaNtEdXx4Vq9Lm4Nb6Kj3Hg1Fd5Sa0ZxYw",
    ),
    ("gitlab-token", "glab auth login --token glpat-PlAnTeD9x2Qv7Lm3Nb8K", "glpat-PlAnTeD9x2Qv7Lm3Nb8K"),
    (
        "slack-token",
        "SLACK bot xoxb-2048115671-4096227341-pLaNtEdQ9x2vL7mN3bK8tR5w",
        "xoxb-2048115671-4096227341-pLaNtEdQ9x2vL7mN3bK8tR5w",
    ),
    (
        "slack-webhook",
        "curl -X POST https://hooks.slack.com/services/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 -d @msg.json",
        "https://hooks.slack.com/services/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",
    ),
    ("stripe-key", "stripe.api_key = 'sk_live_51PlAnTeDq9X2vL7mN3bK8tR5'", "sk_live_51PlAnTeDq9X2vL7mN3bK8tR5"),
    (
        "anthropic-key",
        "ANTHROPIC_API_KEY=sk-ant-api03-pLaNtEd9x2Qv7Lm3Nb8Kt5Rw1Yc6Zd0Fg4Hj2Kl9Mn7Bv3Cx8Zq5Wa1Sd6Fg0Hj-AbCdEfAA",
        "sk-ant-api03-pLaNtEd9x2Qv7Lm3Nb8Kt5Rw1Yc6Zd0Fg4Hj2Kl9Mn7Bv3Cx8Zq5Wa1Sd6Fg0Hj-AbCdEfAA",
    ),
    (
        "openai-key",
        'client = OpenAI(api_key="sk-proj-PlAnTeD9x2Qv7Lm3Nb8Kt5Rw1Yc6Zd0Fg4Hj2Kl9Mn7")',
        "sk-proj-PlAnTeD9x2Qv7Lm3Nb8Kt5Rw1Yc6Zd0Fg4Hj2Kl9Mn7",
    ),
    (
        "openai-key",
        "OPENAI_API_KEY: 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",
        "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",
    ),
    ("basic-auth", "DATABASE_URL postgres://app:Pl4ntedPassw0rd@db.internal:5432/app", "Pl4ntedPassw0rd"),
    ("basic-auth", "git clone https://deploy:gh0stPl4nted@git.example.com/team/repo.git", "gh0stPl4nted"),
    (
        "bearer-token",
        "curl -H 'Authorization: Bearer pLaNtEd0paque9x2Qv7Lm3Nb8Kt5Rw' https://api.example.com/v1/me",
        "pLaNtEd0paque9x2Qv7Lm3Nb8Kt5Rw",
    ),
    ("assigned-secret", "DB_PASSWORD=Pl4nted!Pass", "Pl4nted!Pass"),
    ("assigned-secret", "export SERVICE_TOKEN=9f8PLANTEDa7c6b5d4e3f2a1", "9f8PLANTEDa7c6b5d4e3f2a1"),
    ("assigned-secret", "JWT_SECRET='PlantedS3cretValue!x9'", "PlantedS3cretValue!x9"),
    ("assigned-secret", "MAILGUN_API_KEY=key-3ax6xnjp29jd6fds4gc373sgvjxteol0", "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"),
    ("assigned-secret", '  "clientSecret": "Pl4ntedClientSecretZ9q2",', "Pl4ntedClientSecretZ9q2"),
]

# Must come through unchanged and stay searchable.
LOOKALIKES: list[str] = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "HEAD is now at 9c1d2e3 fix the flaky websocket test",
    "session 0195c0d2-6a2f-7c3b-9a4d-1e2f3a4b5c6d resumed",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    '"integrity": "sha512-Q8E7f8WzK9Hc0h2bN3X4bQ0s8qZbS2Z6pE5lq1y1c6d3YwV+v7J8G+Z0o6vQ5bqKdW2x8o0N9ZZ2bqF8c5cA1A=="',
    "sha256sum dist.tar.gz: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "md5 d41d8cd98f00b204e9800998ecf8427e",
    "![pixel](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "see https://github.com/org/repo/blob/main/src/app.py?plain=1#L30 for details",
    "https://example.com:8443/path/to/page?query=a:b&x=1",
    "git@github.com:org/repo.git",
    "npm install left-pad@1.3.0 --registry https://registry.npmjs.org/",
    "mailto:someone@example.com",
    "ssh user@host.example.com -p 2222",
    "const token = await getToken(session);",
    "password: string;",
    "primary_key = True",
    "api_key = os.environ['API_KEY']",
    "the risk-management key: mind the gap",
    "docker pull ghcr.io/org/image@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "The sk-learn docs say: pip install scikit-learn",
    "eyJhbGciOiJub25lIn0 is a header without a payload",
    "AKIAIOSFODNN7 is too short to be a key id",
]
