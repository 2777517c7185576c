"""Word lists for ``team_chat``: people, companies, places and things a small company's chat talks about.

Kept apart from the generator so that ``team_chat.py`` reads as the method. A pair
``(canonical, other words)`` is written into a turn in its first form and asked about, most of the
time, in its second (``team_chat_facts`` says which slot takes which).
"""

from __future__ import annotations

# The colleagues who talk (two or three per conversation).
PARTICIPANTS = (
    "Dana Kasia Ines Tomas Mira Kofi Rafael Yuki Sven Leila Marek Nadia Oren Hugo Greta Bilal "
    "Chloe Emeka Ada Joon Lucia Farid Hanna Viktor"
).split()
# People the colleagues talk about: candidates, customers' staff, other colleagues.
THIRD_PARTIES = (
    "Arjun Beatriz Callum Delphine Eitan Fatima Gideon Helga Ilario Jasmin Kenji Lorna Matteo Noor "
    "Ottilie Paloma Quentin Rosalind Soren Tamsin Umar Vera Wendell Xiomara Yusuf Zora Anouk Bram "
    "Cosima Dario Elif Florin Gwen Hamid Isolde Jonas Kaia Lars Magda Nils Odile Pavel Rhea "
    "Stellan Talia Ulla Vikram Wren Ximena Yara"
).split()
COMPANY_KINDS = (
    "a six-person web agency",
    "a small bookkeeping software firm",
    "a clinic scheduling startup",
    "a logistics tracking company",
    "a print and signage shop going digital",
    "a language school booking platform",
)
CUSTOMERS = (
    "Brightwell Dental",
    "Okapi Freight",
    "Sundial Bakeries",
    "Marlow and Finch",
    "Tidewater Clinics",
    "Quarry Hill Schools",
    "Halden Logistics",
    "Pebble Creek Farms",
    "Northvale Council",
    "Copperleaf Hotels",
    "Rowan Street Pharmacy",
    "Bluegate Insurance",
    "Ferncliff Studios",
    "Lumen Opticians",
    "Granary Foods",
    "Kestrel Air Charter",
    "Alder Veterinary",
    "Saltmarsh Breweries",
    "Ironbridge Legal",
    "Velvet Orchard Florists",
)
VENDORS = (
    "Corvid Cloud",
    "Lattice Payroll",
    "Brindle Print",
    "Stackhouse Security",
    "Nimbus Phones",
    "Orchard HR",
    "Quill Legal",
    "Harbor Cleaning",
    "Ridgeline Couriers",
    "Tessellate Design",
    "Foxglove Catering",
    "Wayfarer Travel",
    "Keystone IT",
    "Meridian Brokers",
    "Pinecone Analytics",
)
SERVICES = (
    "office cleaning",
    "hosted backups",
    "payroll runs",
    "the phone lines",
    "laptop leasing",
    "penetration testing",
    "contract reviews",
    "courier pickups",
    "Friday lunches",
    "travel booking",
)
OTHER_EMPLOYERS = (
    "Ostrava Robotics",
    "Blue Heron Media",
    "Tandem Health",
    "Wickham Capital",
    "Gale Energy",
    "Cinder Games",
    "Northpoint Retail",
    "Larkspur Bank",
)
CITIES = (
    "Lisbon Krakow Leeds Rotterdam Valencia Tallinn Porto Ghent Lyon Glasgow Bologna Gothenburg "
    "Cork Bilbao Brno Aarhus Montreal Austin Denver Nairobi Seoul Vilnius"
).split()
FAR_CITIES = ("Auckland", "Sydney", "Tokyo", "Honolulu", "Singapore", "Vancouver")
PLACES = (
    "the Peak District",
    "the Dolomites",
    "Lake Bled",
    "the Ardennes",
    "Cornwall",
    "the Algarve",
    "the Black Forest",
    "Connemara",
    "the Tatras",
    "Brittany",
    "Lake Garda",
    "the Lake District",
)
ROLES = (
    ("support lead", "head of customer support"),
    ("backend engineer", "server-side developer"),
    ("product designer", "UX person"),
    ("account executive", "sales rep"),
    ("office manager", "person who runs the office"),
    ("QA engineer", "tester"),
    ("data analyst", "analytics hire"),
    ("DevOps engineer", "infrastructure engineer"),
    ("technical writer", "docs writer"),
    ("frontend developer", "UI engineer"),
    ("finance controller", "bookkeeping lead"),
    ("recruiter", "talent partner"),
)
FEATURES = (
    "single sign-on",
    "an audit log export",
    "a Spanish version of the portal",
    "SMS reminders",
    "weekly PDF reports",
    "a dark mode",
    "bulk CSV import",
    "two-factor login",
    "an on-premise install",
    "a Slack integration",
    "custom invoice templates",
    "offline mode on the tablets",
)
CONFERENCES = (
    "Harbourside DevDays",
    "Open Ledger Forum",
    "FrontRange JS",
    "DataRiver Conf",
    "Baltic Cloud Meetup",
    "SupportOps Live",
    "Retail Tech Expo",
    "Craft and Code",
    "Lakeside SecCon",
    "Northern Product Week",
)
BUDGET_ITEMS = (
    ("new laptops", "replacement notebooks"),
    ("standing desks", "sit-stand desks"),
    ("conference travel", "trips to events"),
    ("the security audit", "the external pentest"),
    ("team training", "courses for the team"),
    ("the website rebuild", "the site redesign"),
    ("customer gifts", "presents for clients"),
    ("cloud credits", "hosting spend"),
)
TOOL_PURPOSES = (
    ("time tracking", "logging our hours"),
    ("the help desk", "handling support tickets"),
    ("password sharing", "keeping shared logins"),
    ("video calls", "remote meetings"),
    ("invoicing", "sending bills to clients"),
    ("the company wiki", "internal documentation"),
    ("expense reports", "claiming money back"),
    ("interview scheduling", "booking candidate calls"),
    ("the status page", "announcing outages"),
    ("error monitoring", "catching crashes"),
)
TOOLS = (
    "Tallyho Deskmate Vaultly Meetbridge Billwise Notewell Receiptly Slotfinder Statusboard "
    "Crashnet Hourglass Ticketbee"
).split()
TOOL_REASONS = (
    "it was the cheapest of the three",
    "it has a proper API",
    "the free tier covers all of us",
    "the trial went well",
    "it exports to spreadsheets",
    "support answered within the hour",
)
ACTIVITIES = (
    ("hiking", "go walking in the hills"),
    ("sailing", "go out on a boat"),
    ("climbing", "go bouldering"),
    ("cycling", "ride a bike"),
    ("at a wedding", "attend a wedding"),
    ("camping", "sleep in a tent"),
    ("skiing", "hit the slopes"),
    ("at a music festival", "see live bands"),
    ("visiting my parents", "see family"),
    ("running a half marathon", "do a long race"),
)
ISSUES = (
    ("login loop", "being unable to sign in"),
    ("slow exports", "exports taking ages"),
    ("duplicate invoices", "being billed twice"),
    ("missing emails", "notifications not arriving"),
    ("broken search", "search returning nothing"),
    ("printer driver", "printing failing"),
    ("sync errors", "data not syncing"),
    ("timezone bug", "wrong times on screen"),
)
SYSTEMS = (
    ("payment gateway", "PaymentGateway"),
    ("booking-api", "booking API"),
    ("customer portal", "client portal"),
    ("mail relay", "outgoing email server"),
    ("VPN", "remote access"),
    ("build server", "CI box"),
    ("invoice service", "billing service"),
    ("file share", "shared drive"),
    ("phone system", "office phones"),
    ("auth service", "login service"),
)
TRIP_PURPOSES = (
    "a customer workshop",
    "the partner summit",
    "an onsite install",
    "training the new reseller",
    "the trade fair",
    "a week of sales meetings",
)
TEAMS = (
    ("platform", "infrastructure"),
    ("mobile", "iOS and Android"),
    ("payments", "billing"),
    ("support", "customer care"),
    ("data", "analytics"),
    ("growth", "marketing"),
    ("design", "UX"),
    ("security", "infosec"),
)
FIRST_PROJECTS = (
    "the invoice PDF rewrite",
    "moving the wiki",
    "the Android widget",
    "the churn dashboard",
    "tidying the onboarding emails",
    "the warehouse scanner app",
    "the pricing page experiments",
    "the backup restore drill",
)
EVENTS = (
    ("summer party", "July get-together"),
    ("winter party", "end-of-year celebration"),
    ("hackathon", "hack day"),
    ("customer day", "client open day"),
    ("quiz night", "pub quiz"),
    ("charity run", "sponsored race"),
)
VENUES = (
    "the Old Boathouse",
    "Gallery Nine",
    "the rooftop at the Marlin Hotel",
    "the Copper Kettle",
    "the botanical garden pavilion",
    "Riverside Lanes",
)
LANGUAGES = (
    ("Portuguese", "Coimbra", "from our Brazilian distributor"),
    ("Polish", "Gdansk", "from the Warsaw supplier"),
    ("Japanese", "Sapporo", "from the Osaka partner"),
    ("Dutch", "Groningen", "from the Utrecht reseller"),
    ("Italian", "Naples", "from the Milan client"),
    ("Greek", "Thessaloniki", "from the Athens office"),
    ("Turkish", "Ankara", "from the Izmir factory"),
    ("Korean", "Daejeon", "from the Busan distributor"),
)
SKILLS = (
    ("Go", "Golang"),
    ("Swift", "iPhone app"),
    ("Kotlin", "Android app"),
    ("PostgreSQL", "Postgres database"),
    ("Terraform", "infrastructure-as-code"),
    ("React", "web frontend"),
    ("Elixir", "Phoenix"),
    ("SQL Server", "MSSQL"),
)
DIETS = (
    (
        "I haven't eaten meat since university",
        "Would {me} enjoy the steakhouse dinner with the client?",
        "Probably not: {me} does not eat meat.",
    ),
    (
        "nuts put me in hospital once, so I read every label",
        "Is the almond cake from the bakery safe to give {me}?",
        "No: {me} is allergic to nuts.",
    ),
    (
        "I stopped drinking alcohol two years ago",
        "Should we thank {me} with a bottle of wine?",
        "No: {me} does not drink alcohol.",
    ),
    (
        "milk and cheese make me properly ill",
        "Is a cheese platter a good welcome snack for {me}?",
        "No: {me} cannot have dairy.",
    ),
)
PROJECTS = (
    ("the booking app", "BookingApp"),
    ("the partner portal", "partner-portal"),
    ("the new checkout", "checkout v2"),
    ("the loyalty scheme", "rewards programme"),
    ("the reporting module", "reports feature"),
    ("the kiosk software", "in-store kiosk app"),
)
STANDUP_TIMES = ("8:45", "9:15", "9:30", "10:00", "10:30", "11:00")
PRICES = ("€9", "€11", "€12", "€14", "€15", "€18", "€22", "€25")
MONTHS_TERM = ("6", "12", "18", "24", "36")
ORDINALS = ("first", "second", "third", "fourth")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTH_NAMES = "January February March April May June July August September October November December".split()

# Said after a planted turn half the time, so that the same fact is not the same line in every chat.
ASIDES = (
    "Putting it here so I don't forget.",
    "Sorry for the short notice.",
    "Calendar is updated.",
    "Just so everyone knows.",
    "More on Monday.",
    "Ask me if anything is unclear.",
    "Will add it to the wiki too.",
    "Not a big deal, just flagging.",
    "Told the others at lunch already.",
    "Sharing in case it matters.",
    "Anyway, back to work.",
    "Typing this from my phone.",
)

# Filler: the talk around the planted facts. Its own words, so that it never answers a question.
CODENAMES = "Heron Juniper Basalt Marigold Tundra Quartz Pelican Bramble Cobalt Fennel Nimbus Osprey".split()
ROOMS = ("the big meeting room", "the kitchen", "the phone booth", "the second floor", "reception")
BUGS = (
    "the date picker",
    "the CSV header",
    "the retry loop",
    "the logout button",
    "the cache key",
    "the email footer",
    "the currency rounding",
    "the upload limit",
)
SNACKS = ("croissants", "a fruit bowl", "leftover pizza", "cinnamon buns", "birthday cake", "samosas")
SHOWS = ("the new detective series", "that cooking show", "the football", "a documentary about bees")
FILLER = (
    "Did anyone look at the {code} board? {n} tickets still sitting in review.",
    "Pushed a fix for {bug} on the {code} branch, could someone review before {hour}?",
    "{customer} replied to the invoice email {lately}, just a question about VAT.",
    "Coffee machine in {room} is making that noise {lately}, I left a note for {who}.",
    "There are {snack} in {room} if anyone wants some, courtesy of {who}.",
    "I'll be about {n} minutes late, the tram is crawling {lately}.",
    "Reminder that expenses for {month} should be in by {weekday}.",
    "The {code} demo went fine, {customer} asked good questions.",
    "Can we move our catch-up to {weekday} at {hour}? {weekday2} is packed for me.",
    "I watched {show} {lately}, no spoilers but wow. {who} told me to try it.",
    "Who has the key for {room}? {who} locked it and my charger is inside.",
    "{n} people have signed up for the {month} lunch and learn so far.",
    "I'm rewriting the tests around {bug}, they keep flaking on the {code} pipeline.",
    "Just had a nice call with {customer}, they are happy with the {code} release.",
    "Has anyone seen the slides for the {code} review? {who} says they are not in the drive.",
    "Printer in {room} is out of toner {lately}, I ordered {n} cartridges.",
    "Quick one: does {customer} pay by card or bank transfer? {who} is asking.",
    "{code} sprint planning is at {hour} on {weekday}, bring your estimates.",
    "The wifi in {room} dropped {n} times {lately}.",
    "Reading the {customer} feedback survey, mostly positive, {n} complaints about {bug}.",
    "Can someone else take the {code} standup notes on {weekday}? I have a dentist appointment.",
    "Lunch plans? {who} suggested the noodle place near {room_out}.",
    "I merged {n} small PRs on {code}, the changelog needs a line.",
    "My laptop fan sounds like a jet engine since the update to version {n}.{n2}.",
    "Rain again. Working from home on {weekday} unless someone needs me near {room_out}.",
    "Tidied the {code} backlog, closed {n} tickets that were done already.",
    "Not sure {customer} read our last email, I'll call them {weekday}.",
    "{snack} for {code} release day? I can pick them up near {room_out}.",
    "The {code} dashboard shows {n} signups yesterday, best day in {month} so far.",
    "I'll write up the notes from the {customer} meeting and share them by {hour}.",
    "Anyone know why {bug} behaves differently on the {code} staging box?",
    "{who} and I paired on {bug} for an hour, think we've got it.",
    "The {code} retro is moved to {weekday}, same room as usual.",
    "Parcel for {who} arrived at reception, looks like {snack}.",
    "I'm blocking {hour} to {hour2} on {weekday} for deep work, ping me after.",
    "Drafted the {month} newsletter, {who} please check the {customer} paragraph.",
)
FILLER_EXTRA = {
    "lately": (
        "again",
        "this morning",
        "since Monday",
        "for the third time this week",
        "after lunch",
        "last night",
    ),
    "room_out": ("the station", "the river", "the old market", "the post office", "the cinema"),
    "hour": ("9:00", "10:30", "11:15", "13:00", "14:30", "15:45", "16:00"),
}
