"""The test set of personal data: one value of each kind the redaction catches, each in the kind of sentence it
appears in on a screen, in typed text or in speech, and near-misses that look like them and must be left alone.
Used by the redaction tests (text, screenshots, exports) and kept here so a change to a detector is judged on the
same set."""
import io

# kind -> (value, a sentence that holds it)
VALUES = {
    "email": ("jane.doe+billing@example.org", "Send the invoice to jane.doe+billing@example.org today"),
    "phone": ("(415) 555-2671", "Call me back on (415) 555-2671 after lunch"),
    "card": ("4111 1111 1111 1111", "Card number 4111 1111 1111 1111 exp 12/29"),
    "iban": ("DE89 3704 0044 0532 0130 00", "Pay to IBAN DE89 3704 0044 0532 0130 00 please"),
    "national_id": ("536-22-1234", "SSN 536-22-1234 on file"),
    "national_id_uk": ("AB 12 34 56 C", "National Insurance number AB 12 34 56 C on the payslip"),
    "national_id_es": ("12345678Z", "DNI 12345678Z del titular"),
    "national_id_it": ("RSSMRA85T10A562S", "Codice fiscale RSSMRA85T10A562S allegato"),
    "ip": ("203.0.113.77", "Login from 203.0.113.77 was blocked"),
    "secret": ("ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c",
               "export GITHUB_TOKEN=ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"),
    "secret_entropy": ("q8Zr2LmX9vTq4WpK7sNb3YcHd6", "api key: q8Zr2LmX9vTq4WpK7sNb3YcHd6"),
    "name": ("Margaret Hamilton", "Assigned to Margaret Hamilton yesterday"),
    "customer_id": ("CUST-88231", "Customer CUST-88231 asked for a refund"),
}

# The project settings that name the last two kinds (a word list and an own pattern).
SETTINGS = {"redaction": {"words": ["Margaret Hamilton"], "patterns": [["customer_id", r"CUST-\d{5}"]]}}

# Texts that look like personal data and are not: none may change.
NEAR_MISSES = [
    "Order 4111 1111 1111 1112 shipped",  # 16 digits whose Luhn check fails
    "ISBN 9788124158685 in stock",  # a book's number whose Luhn check holds: no card network's first digit
    "Version 1.2.3.4000 released",  # not an address: 4000 is no octet
    "Open http://127.0.0.1:8000/miniwob/click-button.html",  # loopback: nobody's address
    "SSN 000-12-3456 is not issued",  # never-issued area number
    "click(x=120, y=48) then scroll(x=10, y=20, direction=\"down\")",
    "screenshots/ab/ab54f3a9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8.jpg",  # a content hash
    "Write to support at example dot org",
    "Meeting on 2024-05-06 at 10:30, room 12",
    "The ThisIsAVeryLongCamelCaseIdentifierName function",
    "DE89 is a prefix, not an account",
    "Margaret's hamiltonian is fine",  # not the listed name
    "Reference QQ 12 34 56 C in the guide",  # HMRC's example prefix, never issued
    "Parcel 12345678A at the depot",  # eight digits and a letter whose DNI check fails
    "Code RSSMRA85T10A562X unknown",  # a codice fiscale's shape whose check character fails
    "Order 046-454-286 and ticket 1234 5678 9012",  # SIN and Aadhaar shapes: bare digit groups, not taken
]


def screen_with(texts: list[str]) -> tuple[bytes, list[dict]]:
    """A white JPEG 400 wide (240 high, or taller for more than 5 texts) with each text drawn in dark grey on a light
    grey element box 40 px below the last, and those elements (agent.envs.base.Element.to_dict: centre and size)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (400, max(240, 20 + 40 * len(texts))), "white")
    draw = ImageDraw.Draw(image)
    elements = []
    for row, text in enumerate(texts):
        top = 10 + row * 40
        draw.rectangle((10, top, 390, top + 30), fill=(200, 200, 200))
        draw.text((14, top + 8), text, fill=(20, 20, 20))
        elements.append({"role": "text", "text": text, "x": 200, "y": top + 15, "width": 380, "height": 30,
                         "checked": None, "focused": False})
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=95)
    return out.getvalue(), elements
