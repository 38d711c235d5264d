"""Settings of the shop the webapp env serves: django-oscar on SQLite, one file a episode.

Paths come from the environment the env starts the server with: SHOP_DB (the episode's SQLite copy),
SHOP_DATA (the golden build's folder: search index, media, collected static files). The secret key is
not a secret: the site only ever listens on loopback for an agent's episode.
"""
import os
import warnings
from pathlib import Path

from oscar.defaults import *  # noqa: F403 - oscar's documented way to take its defaults

DATA = Path(os.environ.get("SHOP_DATA", Path(__file__).resolve().parent.parent / "data"))
DB = os.environ.get("SHOP_DB", str(DATA / "golden.sqlite3"))

SECRET_KEY = "loupe-webapp-shop-local-only"
DEBUG = os.environ.get("SHOP_DEBUG") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
SITE_ID = 1

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.sites",
    "django.contrib.flatpages",
    "oscar.config.Shop",
    "oscar.apps.analytics.apps.AnalyticsConfig",
    "oscar.apps.checkout.apps.CheckoutConfig",
    "oscar.apps.address.apps.AddressConfig",
    "oscar.apps.shipping.apps.ShippingConfig",
    "oscar.apps.catalogue.apps.CatalogueConfig",
    "oscar.apps.catalogue.reviews.apps.CatalogueReviewsConfig",
    "oscar.apps.communication.apps.CommunicationConfig",
    "oscar.apps.partner.apps.PartnerConfig",
    "oscar.apps.basket.apps.BasketConfig",
    "oscar.apps.payment.apps.PaymentConfig",
    "oscar.apps.offer.apps.OfferConfig",
    "oscar.apps.order.apps.OrderConfig",
    "oscar.apps.customer.apps.CustomerConfig",
    "oscar.apps.search.apps.SearchConfig",
    "oscar.apps.voucher.apps.VoucherConfig",
    "oscar.apps.wishlists.apps.WishlistsConfig",
    "oscar.apps.dashboard.apps.DashboardConfig",
    "oscar.apps.dashboard.reports.apps.ReportsDashboardConfig",
    "oscar.apps.dashboard.users.apps.UsersDashboardConfig",
    "oscar.apps.dashboard.orders.apps.OrdersDashboardConfig",
    "oscar.apps.dashboard.catalogue.apps.CatalogueDashboardConfig",
    "oscar.apps.dashboard.offers.apps.OffersDashboardConfig",
    "oscar.apps.dashboard.partners.apps.PartnersDashboardConfig",
    "oscar.apps.dashboard.pages.apps.PagesDashboardConfig",
    "oscar.apps.dashboard.ranges.apps.RangesDashboardConfig",
    "oscar.apps.dashboard.reviews.apps.ReviewsDashboardConfig",
    "oscar.apps.dashboard.vouchers.apps.VouchersDashboardConfig",
    "oscar.apps.dashboard.communications.apps.CommunicationsDashboardConfig",
    "oscar.apps.dashboard.shipping.apps.ShippingDashboardConfig",
    "widget_tweaks",
    "haystack",
    "treebeard",
    "sorl.thumbnail",
    "django_tables2",
    "shopsite",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "oscar.apps.basket.middleware.BasketMiddleware",
    "django.contrib.flatpages.middleware.FlatpageFallbackMiddleware",
]

ROOT_URLCONF = "shopsite.urls"
WSGI_APPLICATION = "shopsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).resolve().parent / "templates"],  # before the apps': overrides oscar's
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.debug",
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.template.context_processors.i18n",
                "django.contrib.messages.context_processors.messages",
                "oscar.apps.search.context_processors.search_form",
                "oscar.apps.checkout.context_processors.checkout",
                "oscar.apps.communication.notifications.context_processors.notifications",
                "oscar.core.context_processors.metadata",
            ],
        },
    },
]

# CONN_MAX_AGE 0: every request opens the episode's file again, so a reset (a new copy put in place) is
# seen by the next request. No cache: nothing of one episode may outlive its database.
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DB, "CONN_MAX_AGE": 0,
                         "OPTIONS": {"timeout": 10}}}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

AUTHENTICATION_BACKENDS = (
    "oscar.apps.customer.auth_backends.EmailBackend",
    "django.contrib.auth.backends.ModelBackend",
)
AUTH_PASSWORD_VALIDATORS = []
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # a local sandbox: logins in ms

HAYSTACK_CONNECTIONS = {
    "default": {"ENGINE": "haystack.backends.whoosh_backend.WhooshEngine", "PATH": str(DATA / "whoosh_index")},
}

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = str(DATA / "static")
MEDIA_URL = "/media/"
MEDIA_ROOT = str(DATA / "media")
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
THUMBNAIL_KVSTORE = "sorl.thumbnail.kvstores.cached_db_kvstore.KVStore"

# A catalogue page costs Oscar about 7 queries a product: 12 a page keeps a page load short.
OSCAR_PRODUCTS_PER_PAGE = 12
OSCAR_DASHBOARD_ITEMS_PER_PAGE = 10
warnings.filterwarnings("ignore", message="Whoosh does not handle query faceting")

OSCAR_SHOP_NAME = "Loupe Shop"
OSCAR_SHOP_TAGLINE = "books, audio and home goods"
OSCAR_DEFAULT_CURRENCY = "GBP"
OSCAR_ALLOW_ANON_CHECKOUT = True
OSCAR_ALLOW_ANON_REVIEWS = True
OSCAR_MODERATE_REVIEWS = False
OSCAR_SEND_REGISTRATION_EMAIL = False
OSCAR_INITIAL_ORDER_STATUS = "Pending"
OSCAR_INITIAL_LINE_STATUS = "Pending"
OSCAR_ORDER_STATUS_PIPELINE = {"Pending": ("Being processed", "Cancelled"), "Being processed": ("Shipped",
                               "Cancelled"), "Shipped": (), "Cancelled": ()}

LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"stderr": {"class": "logging.StreamHandler"}},
           "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR"}}}
