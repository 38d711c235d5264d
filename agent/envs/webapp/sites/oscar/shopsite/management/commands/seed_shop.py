"""Seed the shop: categories, 36 products with stock, prices and pictures, a shipping country, a staff
user and a customer. Deterministic (the same ids every build), so task files can name URLs."""
import io
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.contrib.sites.models import Site
from django.core.files.base import ContentFile
from django.core.management.base import BaseCommand
from django.db import transaction
from oscar.apps.catalogue.categories import create_from_breadcrumbs
from oscar.core.loading import get_model
from PIL import Image, ImageDraw

Country = get_model("address", "Country")
Partner = get_model("partner", "Partner")
StockRecord = get_model("partner", "StockRecord")
Product = get_model("catalogue", "Product")
ProductClass = get_model("catalogue", "ProductClass")
ProductCategory = get_model("catalogue", "ProductCategory")
ProductImage = get_model("catalogue", "ProductImage")

STAFF = ("staff@example.com", "staff-password")
CUSTOMER = ("customer@example.com", "customer-password")

# (category path, product class, [(title, price, stock, description)])
CATALOGUE = [
    ("Books > Fiction", "Book", [
        ("The Silent Harbour", "12.99", 14, "A lighthouse keeper's daughter solves a mystery on a northern coast."),
        ("Winter of Glass", "9.50", 8, "A family saga across three cold decades in a mountain town."),
        ("The Cartographer's Son", "14.00", 5, "A young mapmaker inherits an atlas of places that do not exist."),
        ("Paper Lanterns", "7.99", 20, "Short stories about small kindnesses in a busy city."),
        ("Orchard at Midnight", "11.25", 3, "A gentle ghost story set among apple trees."),
    ]),
    ("Books > Computing", "Book", [
        ("Practical Python Patterns", "34.00", 12, "Idioms and patterns for readable Python programs."),
        ("Databases from Scratch", "29.99", 6, "How storage engines, indexes and transactions work."),
        ("The Pragmatic Tester", "24.50", 9, "Testing habits that keep software honest."),
        ("Networks Explained", "31.00", 4, "Packets, routes and protocols without the jargon."),
        ("Learning SQL Step by Step", "19.99", 15, "Queries, joins and aggregates with worked examples."),
    ]),
    ("Books > Cooking", "Book", [
        ("Bread Every Day", "16.00", 10, "Simple loaves for busy kitchens."),
        ("The Vegetable Table", "18.50", 7, "Seasonal plates built around vegetables."),
        ("Soups for All Seasons", "13.75", 11, "Fifty soups from light broths to winter stews."),
        ("Spice Routes", "22.00", 2, "Recipes along the old spice trade."),
    ]),
    ("Electronics > Audio", "Gadget", [
        ("Wireless Headphones", "79.00", 6, "Over-ear headphones with 30 hours of battery."),
        ("Bluetooth Speaker", "45.00", 9, "A splash-proof speaker with deep bass."),
        ("Studio Earbuds", "39.99", 13, "In-ear monitors with a braided cable."),
        ("Portable Radio", "27.50", 5, "FM and DAB radio with a hand crank."),
        ("Turntable Classic", "149.00", 2, "A belt-drive record player with a built-in preamp."),
    ]),
    ("Electronics > Accessories", "Gadget", [
        ("USB-C Cable 2m", "8.99", 40, "A braided USB-C to USB-C cable, 60 W."),
        ("Laptop Stand", "32.00", 8, "Aluminium stand with six heights."),
        ("Wireless Mouse", "21.50", 17, "A quiet mouse with a rechargeable battery."),
        ("Mechanical Keyboard", "89.00", 4, "Tactile switches and a detachable cable."),
        ("Power Bank 20000", "35.00", 10, "Charges a phone five times over."),
    ]),
    ("Home > Kitchen", "Home goods", [
        ("Cast Iron Pan", "42.00", 6, "A pre-seasoned 26 cm skillet."),
        ("Chef's Knife", "55.00", 5, "A 20 cm knife of German steel."),
        ("Ceramic Teapot", "24.00", 9, "Holds six cups; dishwasher safe."),
        ("Bamboo Chopping Board", "15.50", 14, "A large board with a juice groove."),
        ("Espresso Maker", "38.00", 7, "A stovetop pot for six cups."),
    ]),
    ("Home > Garden", "Home goods", [
        ("Watering Can", "17.99", 12, "A 7-litre galvanised can."),
        ("Pruning Shears", "19.50", 10, "Bypass shears for stems up to 2 cm."),
        ("Herb Seed Kit", "9.99", 25, "Basil, parsley, chives and thyme seeds."),
        ("Garden Kneeler", "23.00", 6, "A padded kneeler that turns into a seat."),
        ("Bird Feeder", "14.25", 9, "A hanging feeder for seeds and nuts."),
        ("Solar Lanterns (set of 4)", "29.00", 8, "Lanterns that light up at dusk."),
        ("Compost Bin", "49.00", 3, "A 300-litre bin with a hatch."),
    ]),
]

_COLOURS = ["#c0392b", "#2471a3", "#1e8449", "#b9770e", "#7d3c98", "#117a65", "#a04000"]


def _picture(title: str, colour: str) -> bytes:
    image = Image.new("RGB", (400, 400), colour)
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 20, 380, 380), outline="white", width=6)
    words, lines, line = title.split(), [], ""
    for word in words:
        if len(line) + len(word) > 14 and line:
            lines.append(line)
            line = word
        else:
            line = (line + " " + word).strip()
    lines.append(line)
    for i, text in enumerate(lines):
        draw.text((40, 150 + 30 * i), text, fill="white", font_size=28)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=85)
    return out.getvalue()


class Command(BaseCommand):
    help = "Seed the shop's catalogue, a shipping country and two users (idempotent on an empty database)."

    @transaction.atomic
    def handle(self, *args, **options):
        if Product.objects.exists():
            self.stdout.write("already seeded")
            return
        Site.objects.update_or_create(pk=1, defaults={"domain": "127.0.0.1", "name": "Loupe Shop"})
        Country.objects.update_or_create(iso_3166_1_a2="GB", defaults={
            "iso_3166_1_a3": "GBR", "iso_3166_1_numeric": "826", "printable_name": "United Kingdom",
            "name": "United Kingdom of Great Britain and Northern Ireland", "is_shipping_country": True})
        partner, _ = Partner.objects.get_or_create(name="Loupe Supplies")
        classes = {}
        sku = 1000
        for n, (path, class_name, products) in enumerate(CATALOGUE):
            if class_name not in classes:
                classes[class_name] = ProductClass.objects.create(name=class_name, requires_shipping=True,
                                                                  track_stock=True)
            category = create_from_breadcrumbs(path)
            for title, price, stock, description in products:
                sku += 1
                product = Product.objects.create(product_class=classes[class_name], title=title, upc=f"LS{sku}",
                                                 description=f"<p>{description}</p>", structure="standalone")
                ProductCategory.objects.create(product=product, category=category)
                StockRecord.objects.create(product=product, partner=partner, partner_sku=f"SKU{sku}",
                                           price=Decimal(price), price_currency="GBP", num_in_stock=stock)
                image = ProductImage(product=product, display_order=0)
                image.original.save(f"{product.upc}.jpg", ContentFile(_picture(title, _COLOURS[n % 7])), save=True)
        User = get_user_model()
        staff = User.objects.create_user(username="staff", email=STAFF[0], password=STAFF[1],
                                         first_name="Sam", last_name="Staff", is_staff=True, is_superuser=True)
        customer = User.objects.create_user(username="customer", email=CUSTOMER[0], password=CUSTOMER[1],
                                            first_name="Casey", last_name="Customer")
        self.stdout.write(f"seeded {Product.objects.count()} products; users {staff.email}, {customer.email}")
