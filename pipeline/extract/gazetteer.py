"""Small built-in word lists for the offline extractor's cheap typing heuristics.

Deliberately compact: they give typing evidence for the most frequent names (countries,
big cities, US states, nationalities, common given names) and the keywords that mark an
organisation, place or event. Everything else falls back to context cues. All entries are
lower-case; Russian entries are matched through a crude stem (see `nlp._ru_stem`).
"""

from __future__ import annotations


def _words(s: str) -> frozenset[str]:
    """Entries separated by '|' or newlines, lower-cased (entries may contain spaces)."""
    return frozenset(w.strip().lower() for w in s.replace("\n", "|").split("|") if w.strip())


COUNTRIES = _words(
    """afghanistan|albania|algeria|andorra|angola|antigua and barbuda|argentina|armenia|australia
    |austria|azerbaijan|bahamas|bahrain|bangladesh|barbados|belarus|belgium|belize|benin|bhutan
    |bolivia|bosnia and herzegovina|botswana|brazil|brunei|bulgaria|burkina faso|burundi
    |cambodia|cameroon|canada|cape verde|central african republic|chad|chile|china|colombia
    |comoros|congo|costa rica|croatia|cuba|cyprus|czech republic|czechia|denmark|djibouti
    |dominica|dominican republic|east timor|ecuador|egypt|el salvador|equatorial guinea|eritrea
    |estonia|eswatini|ethiopia|fiji|finland|france|gabon|gambia|georgia|germany|ghana|greece
    |grenada|guatemala|guinea|guinea-bissau|guyana|haiti|honduras|hungary|iceland|india
    |indonesia|iran|iraq|ireland|israel|italy|ivory coast|jamaica|japan|jordan|kazakhstan|kenya
    |kiribati|kosovo|kuwait|kyrgyzstan|laos|latvia|lebanon|lesotho|liberia|libya|liechtenstein
    |lithuania|luxembourg|madagascar|malawi|malaysia|maldives|mali|malta|marshall islands
    |mauritania|mauritius|mexico|micronesia|moldova|monaco|mongolia|montenegro|morocco
    |mozambique|myanmar|burma|namibia|nauru|nepal|netherlands|holland|new zealand|nicaragua
    |niger|nigeria|north korea|north macedonia|macedonia|norway|oman|pakistan|palau|palestine
    |panama|papua new guinea|paraguay|peru|philippines|poland|portugal|qatar|romania|russia
    |russian federation|rwanda|saint lucia|samoa|san marino|saudi arabia|senegal|serbia
    |seychelles|sierra leone|singapore|slovakia|slovenia|solomon islands|somalia|south africa
    |south korea|korea|south sudan|spain|sri lanka|sudan|suriname|sweden|switzerland|syria
    |taiwan|tajikistan|tanzania|thailand|togo|tonga|trinidad and tobago|tunisia|turkey
    |turkmenistan|tuvalu|uganda|ukraine|united arab emirates|united kingdom|great britain
    |britain|england|scotland|wales|northern ireland|united states|united states of america
    |america|uruguay|uzbekistan|vanuatu|vatican city|venezuela|vietnam|yemen|zambia|zimbabwe
    |soviet union|yugoslavia|czechoslovakia|prussia|ussr|usa|uk|uae|prc
    |россия|российская федерация|ссср|сша|украина|беларусь|белоруссия|казахстан|германия
    |рф|британия|соединённые штаты|соединенные штаты|кнр|кндр|оаэ|юар|ирландия|шотландия
    |исландия|люксембург|словакия|словения|хорватия|черногория|албания|македония|кипр
    |мальта|монголия|таиланд|индонезия|малайзия|филиппины|сингапур|тайвань|непал
    |бангладеш|шри-ланка|ливан|иордания|йемен|катар|кувейт|бахрейн|оман|тунис|алжир
    |марокко|судан|эфиопия|кения|нигерия|гана|мали|сенегал|ангола|колумбия|венесуэла|перу
    |чили|боливия|эквадор|уругвай|парагвай|новая зеландия|абхазия|эмираты
    |франция|италия|испания|великобритания|англия|китай|япония|индия|турция|польша|грузия
    |армения|азербайджан|узбекистан|киргизия|таджикистан|туркмения|молдавия|молдова|литва
    |латвия|эстония|финляндия|швеция|норвегия|дания|австрия|швейцария|бельгия|нидерланды
    |голландия|канада|мексика|бразилия|аргентина|египет|израиль|иран|ирак|сирия|афганистан
    |пакистан|корея|вьетнам|греция|болгария|сербия|чехия|венгрия|румыния|португалия|австралия
    |куба|ливия|саудовская аравия|северная корея|южная корея"""
)

CITIES = _words(
    """london|paris|berlin|rome|madrid|barcelona|lisbon|vienna|prague|budapest|warsaw|moscow
    |saint petersburg|st. petersburg|kiev|kyiv|minsk|amsterdam|brussels|copenhagen|stockholm
    |oslo|helsinki|dublin|edinburgh|glasgow|manchester|liverpool|birmingham|oxford|cambridge
    |athens|istanbul|ankara|munich|hamburg|frankfurt|cologne|milan|naples|venice|florence
    |zurich|geneva|marseille|lyon|tokyo|osaka|kyoto|beijing|shanghai|hong kong|seoul|taipei
    |bangkok|hanoi|manila|jakarta|delhi|new delhi|mumbai|bombay|kolkata|calcutta|chennai
    |karachi|lahore|dhaka|tehran|baghdad|jerusalem|tel aviv|cairo|dubai|riyadh|mecca
    |nairobi|lagos|johannesburg|cape town|sydney|melbourne|auckland|toronto|montreal
    |vancouver|ottawa|new york|new york city|los angeles|chicago|houston|philadelphia
    |phoenix|san antonio|san diego|dallas|san francisco|seattle|boston|detroit|atlanta
    |miami|denver|washington, d.c.|washington d.c.|baltimore|pittsburgh|cleveland|nashville
    |memphis|new orleans|las vegas|portland|minneapolis|st. louis|honolulu|brooklyn
    |manhattan|hollywood|mexico city|havana|bogotá|lima|santiago|buenos aires|são paulo
    |sao paulo|rio de janeiro|caracas|montevideo|quebec city|belgrade|bucharest|sofia|zagreb
    |riga|vilnius|tallinn|tbilisi|yerevan|baku|almaty|tashkent|novosibirsk|yekaterinburg
    |kazan|sochi|vladivostok|odessa|krakow|kraków
    |москва|санкт-петербург|петербург|ленинград|киев|минск|новосибирск|екатеринбург|казань
    |пхеньян|сеул|милан|чикаго|гонконг|шанхай|лос-анджелес|сан-франциско|бостон|майами
    |торонто|монреаль|ванкувер|сидней|мельбурн|дели|мумбаи|бангкок|дубай|каир|тегеран
    |багдад|дамаск|бейрут|иерусалим|тель-авив|афины|лиссабон|барселона|мюнхен|гамбург
    |франкфурт|цюрих|стокгольм|осло|копенгаген|хельсинки|дублин|эдинбург|манчестер
    |ливерпуль|будапешт|бухарест|белград|софия|кишинёв|кишинев|челябинск|тюмень|томск
    |ярославль|тула|курск|саратов|краснодар|ставрополь|махачкала|грозный|севастополь
    |симферополь|хабаровск|якутск|барнаул|кемерово|сургут|нижний тагил|тверь|смоленск
    |нижний новгород|самара|омск|ростов-на-дону|уфа|красноярск|пермь|воронеж|волгоград|сочи
    |владивосток|калининград|мурманск|архангельск|иркутск|тбилиси|ереван|баку|астана|алматы
    |ташкент|рига|вильнюс|таллин|лондон|париж|берлин|рим|мадрид|вена|прага|варшава|пекин
    |токио|нью-йорк|вашингтон|стамбул|анкара|женева|брюссель|амстердам|одесса|харьков"""
)

STATES = _words(
    """alabama|alaska|arizona|arkansas|california|colorado|connecticut|delaware|florida
    |hawaii|idaho|illinois|indiana|iowa|kansas|kentucky|louisiana|maine|maryland
    |massachusetts|michigan|minnesota|mississippi|missouri|montana|nebraska|nevada
    |new hampshire|new jersey|new mexico|north carolina|north dakota|ohio|oklahoma|oregon
    |pennsylvania|rhode island|south carolina|south dakota|tennessee|texas|utah|vermont
    |virginia|west virginia|wisconsin|wyoming|ontario|quebec|british columbia|alberta
    |manitoba|saskatchewan|nova scotia|new brunswick|newfoundland|bavaria|tuscany|catalonia
    |andalusia|punjab|bengal|kerala|tamil nadu|siberia|crimea|chechnya|tatarstan|yorkshire
    |kent|essex|surrey|lancashire|cornwall|devon
    |московская область|подмосковье|сибирь|крым|чечня|татарстан|башкортостан|дагестан
    |калифорния|техас|флорида"""
)

# Continents, regions, seas and other well-known places that are neither country nor city.
LOCATIONS = _words(
    """africa|europe|asia|antarctica|antarctic|arctic|oceania|australasia|americas|north america
    |south america|latin america|central america|middle east|near east|far east|east asia
    |southeast asia|south asia|central asia|western europe|eastern europe|scandinavia|balkans
    |caribbean|mediterranean|atlantic|pacific|sahara|himalayas|alps|andes|amazon|rockies
    |west bank|gaza strip|gaza|kashmir|tibet|caucasus|new england|midwest|the west|earth|moon
    |mars|the north|the south|highlands|lowlands|riviera|levant|persian gulf|great lakes
    |европа|азия|африка|северная америка|южная америка|арктика|антарктида|кавказ|урал
    |дальний восток|ближний восток|средняя азия|прибалтика|балканы|земля"""
)

# Demonyms / nationality adjectives. Russian entries are adjective stems matched by prefix.
NATIONALITIES = _words(
    """american|british|english|scottish|welsh|irish|french|german|italian|spanish|portuguese
    |dutch|belgian|swiss|austrian|swedish|norwegian|danish|finnish|icelandic|polish|czech
    |slovak|hungarian|romanian|bulgarian|serbian|croatian|greek|turkish|russian|ukrainian
    |belarusian|georgian|armenian|chinese|japanese|korean|vietnamese|thai|indian|pakistani
    |bangladeshi|iranian|persian|iraqi|syrian|israeli|jewish|arab|arabic|egyptian|moroccan
    |nigerian|kenyan|ethiopian|south african|australian|canadian|mexican|brazilian
    |argentine|argentinian|chilean|colombian|peruvian|cuban|venezuelan|filipino|indonesian
    |malaysian|soviet|european|asian|african|latin|roman|byzantine|ottoman|prussian
    |scandinavian|hispanic|new zealander|kazakh|uzbek|mongolian|tibetan|bengali|punjabi
    |tamil|hebrew|latvian|lithuanian|estonian|albanian|slovenian|bosnian|catalan|basque
    |flemish|victorian|native american|african american|latino|aboriginal"""
)
NATIONALITIES_RU = (
    "русск",
    "российск",
    "американск",
    "английск",
    "британск",
    "французск",
    "немецк",
    "германск",
    "итальянск",
    "испанск",
    "китайск",
    "японск",
    "украинск",
    "белорусск",
    "польск",
    "советск",
    "европейск",
    "турецк",
    "грузинск",
    "армянск",
    "казахск",
)

# Nationality words that also name a language ("in English", "the French language").
LANGUAGES = _words(
    """english|french|german|italian|spanish|portuguese|dutch|swedish|norwegian|danish
    |finnish|polish|czech|hungarian|romanian|greek|turkish|russian|ukrainian|chinese
    |mandarin|cantonese|japanese|korean|vietnamese|thai|hindi|urdu|bengali|persian|arabic
    |hebrew|latin|sanskrit|swahili|tamil|punjabi|catalan|basque|welsh|irish|esperanto
    |yiddish"""
)

RELIGIONS = _words(
    """christianity|islam|judaism|hinduism|buddhism|sikhism|taoism|shinto|catholicism
    |protestantism|orthodoxy|christian|muslim|catholic|protestant|buddhist|hindu|sikh
    |lutheran|anglican|methodist|baptist|mormon|christ|christ's|jesus|god
    |христианство|ислам|иудаизм|буддизм|православие|католицизм"""
)

# Common given names (English-speaking world + a few European and Russian ones).
GIVEN_NAMES = _words(
    """aaron|adam|adrian|alan|albert|alex|alexander|alfred|alice|amanda|amy|andrew|angela
    |ann|anna|anne|anthony|arthur|barbara|ben|benjamin|bernard|bernhard|betty|bill|bob|brian
    |bruce|carl|carlos|carol|caroline|catherine|charles|charlie|charlotte|chris|christian
    |christopher|claire|daniel|david|dennis|diana|dick|donald|dorothy|douglas|edward|elizabeth
    |ellen|emily|emma|eric|ernest|eva|frank|frederick|fred|gary|george|gerald|grace|harold
    |harry|helen|henry|howard|hugh|ian|isaac|jack|jacob|james|jan|jane|janet|jason|jean
    |jeff|jennifer|jerry|jessica|jim|joan|joe|john|johnny|jonathan|joseph|joshua|julia
    |julie|karen|kate|katherine|keith|kelly|kenneth|kevin|larry|laura|lawrence|leo|linda
    |lisa|louis|louise|lucy|margaret|maria|marie|mark|martha|martin|mary|matthew|michael
    |michelle|nancy|nicholas|oliver|patricia|patrick|paul|peter|philip|rachel|ralph
    |raymond|richard|robert|roger|ronald|rose|ruth|ryan|samuel|sandra|sarah|scott|sharon
    |simon|stephen|steve|steven|susan|thomas|tim|timothy|tom|tony|victoria|walter|william
    |hans|karl|friedrich|wolfgang|pierre|jacques|françois|francois|louis|giovanni|giuseppe
    |marco|juan|josé|jose|luis|miguel|antonio|pedro|carlo|ivan|boris|vladimir|sergei|dmitri
    |mikhail|nikolai|ali|mohammed|muhammad|ahmed|hiroshi|kim|angela|ebenezer|belle|jacob
    |владимир|александр|сергей|дмитрий|андрей|алексей|михаил|николай|иван|борис|евгений
    |игорь|юрий|павел|пётр|петр|виктор|олег|анатолий|василий|фёдор|федор|лев|антон|максим
    |анна|мария|елена|ольга|татьяна|наталья|ирина|светлана|екатерина|юлия|ангела|валентина"""
)

# Words before a name that mark a person. MR-type honorifics are stripped from the title.
HONORIFICS_STRIP = _words("mr|mr.|mrs|mrs.|ms|ms.|dr|dr.|prof|prof.|mister|miss|messrs|sir")
PERSON_TITLES = _words(
    """king|queen|prince|princess|president|senator|governor|general|captain|colonel|pope
    |emperor|empress|duke|duchess|lord|lady|saint|st|bishop|archbishop|cardinal|chancellor
    |minister|judge|justice|uncle|aunt|father|mother|brother|sister|sergeant|lieutenant
    |admiral|marshal|count|countess|baron|tsar|czar|sultan|sheikh|rabbi|reverend|rev|pharaoh
    |господин|госпожа|президент|премьер-министр|министр|генерал|царь|король|королева|князь
    |профессор|доктор|губернатор|мэр|канцлер|патриарх|император|императрица|академик"""
)
# Professions: a lower-case word before a capitalised span marks a person; the word itself
# becomes a PROFESSION entity.
PROFESSIONS = _words(
    """actor|actress|singer|songwriter|musician|composer|conductor|pianist|guitarist|drummer
    |rapper|producer|director|filmmaker|screenwriter|writer|author|novelist|poet|playwright
    |journalist|editor|publisher|painter|sculptor|artist|photographer|architect|designer
    |scientist|physicist|chemist|biologist|mathematician|economist|psychologist|philosopher
    |historian|sociologist|linguist|astronomer|engineer|inventor|physician|surgeon|doctor
    |nurse|lawyer|attorney|judge|politician|diplomat|businessman|businesswoman
    |entrepreneur|banker|merchant|clerk|teacher|professor|lecturer|footballer|player
    |coach|manager|athlete|boxer|wrestler|cyclist|swimmer|tennis player|golfer|jockey
    |soldier|officer|general|admiral|pilot|astronaut|priest|bishop|monk|nun|theologian
    |comedian|dancer|model|chef|farmer|explorer|king|queen|emperor|president
    |актёр|актер|актриса|певец|певица|композитор|писатель|поэт|журналист|режиссёр|режиссер
    |художник|учёный|ученый|физик|химик|математик|экономист|историк|инженер|врач|юрист
    |адвокат|политик|дипломат|бизнесмен|предприниматель|банкир|учитель|профессор|футболист
    |тренер|спортсмен|военный|офицер|священник"""
)
# Verbs right after a span (or right before it: "said Scrooge") that mark a person.
PERSON_VERBS = _words(
    """said|says|asked|replied|cried|answered|exclaimed|whispered|thought|smiled|laughed
    |returned|observed|added|continued|told|wrote|married|died|was born|who
    |сказал|сказала|заявил|заявила|ответил|ответила|спросил|спросила|родился|родилась
    |умер|умерла|встретился|встретилась|отметил|отметила|подчеркнул|подчеркнула"""
)

# Keywords inside a span (any token) -> type. Checked in this order: the last token's
# place/facility keyword wins over an organisation keyword elsewhere ("Bank Street").
FACILITY_LAST = _words(
    """street|road|avenue|boulevard|lane|bridge|station|airport|stadium|arena|square|tower
    |building|theatre|theater|hall|palace|castle|cathedral|abbey|temple|mosque|museum
    |gallery|library|hospital|prison|park|garden|gardens|tunnel|highway|railway|dam|port
    |harbour|harbor|center|centre|house|court|fort|church|chapel|school|college|monument
    |route|interstate|motorway|freeway|pier|lighthouse|mine|plant|mall|market|cemetery
    |улица|проспект|площадь|мост|вокзал|аэропорт|стадион|театр|музей|собор|храм|дворец"""
)
LOCATION_LAST = _words(
    """river|lake|mountain|mountains|mount|hill|hills|island|islands|isle|sea|ocean|bay
    |valley|desert|forest|peninsula|gulf|coast|canal|falls|creek|strait|channel|glacier
    |volcano|beach|cape|plain|plains|region|basin|delta|river's
    |река|озеро|гора|горы|остров|море|океан|залив|пролив"""
)
STATE_LAST = _words("county|province|state|oblast|prefecture|territory|область|край|округ")
DISTRICT_LAST = _words("district|borough|quarter|neighbourhood|neighborhood|район")
EVENT_WORDS = _words(
    """war|battle|revolution|olympics|olympic|games|championship|championships|cup|festival
    |election|elections|crisis|massacre|siege|summit|expo|tournament|grand prix|rebellion
    |uprising|coup|conquest|invasion|riots|marathon|derby|contest|reign|era|age|reformation
    |renaissance|crusade|crusades|holocaust|genocide|blitz|offensive|campaign|expedition
    |olympiad|world series|super bowl|eurovision|conference|conferences|symposium|exhibition
    |exposition|congresses|lectures|trial
    |война|битва|революция|олимпиада|чемпионат|кубок|фестиваль|выборы|саммит|восстание"""
)
# Fields of study: "Nobel Prize in Physics" names a subject, not a place.
DISCIPLINES = _words(
    """physics|chemistry|medicine|physiology|literature|economics|mathematics|biology|peace
    |philosophy|history|astronomy|geology|engineering|law|theology|physiology or medicine
    |физика|химия|медицина|литература|экономика|математика|биология|философия|история"""
)
LAW_WORDS = _words("act|treaty|constitution|amendment|code|law|bill|charter|закон|кодекс|договор")
AWARD_WORDS = _words(
    "award|awards|prize|medal|trophy|oscar|grammy|emmy|honour|honor|премия|орден|медаль"
)
ORG_WORDS = _words(
    """inc|inc.|ltd|ltd.|llc|plc|corp|corp.|co.|gmbh|ag|sa|company|corporation|group|holdings
    |university|college|institute|institution|academy|school|bank|party|ministry|department
    |church|fc|club|council|association|society|federation|union|league|committee|commission
    |agency|bureau|office|organization|organisation|foundation|trust|fund|board|authority
    |administration|army|navy|force|forces|police|government|parliament|congress|senate
    |court|assembly|records|studios|studio|pictures|entertainment|media|press|publishing
    |publications|airlines|airways|railways|motors|industries|systems|technologies
    |enterprises|network|broadcasting|channel|radio|television|tv|news|times|post|journal
    |magazine|gazette|review|herald|tribune|band|orchestra|choir|team|brothers|partners
    |service|services|laboratory|laboratories|hospital|museum|library|firm|network
    |университет|компания|партия|банк|министерство|институт|академия|корпорация|фонд
    |союз|ассоциация|комитет|агентство|служба|правительство|парламент|дума|клуб|общество
    |газета|журнал|холдинг|группа|концерн|завод"""
)

HOLIDAYS = _words(
    """christmas|christmas day|christmas eve|easter|ramadan|thanksgiving|new year|new year's day
    |hanukkah|passover|diwali|halloween|independence day|twelfth-night|twelfth night
    |рождество|пасха|новый год"""
)
CITY_LAST = _words("city|town|village|township|municipality|город|село|деревня")
# Endings of single unknown words that look like place names (Priozersk, Hochheim, ...).
PLACE_SUFFIXES = tuple(
    """burg|berg|bourg|ville|ton|ford|field|ham|stadt|grad|gorod|sk|land|shire|pur|abad|heim
    |hurst|chester|caster|mouth|by|thorpe|wick|bury|borough|polis|ovo|evo|ino|ск|град|бург
    """.replace("\n", "")
    .replace(" ", "")
    .split("|")
)
FAMILY_LAST = _words("dynasty|family|clan|династия|семья|род")

# Capitalised words that are never a name on their own (beyond the stopword lists).
NON_NAMES = _words(
    """january|february|march|april|may|june|july|august|september|october|november|december
    |monday|tuesday|wednesday|thursday|friday|saturday|sunday|however|although|though
    |during|after|before|since|while|when|where|what|which|who|whom|whose|why|how|yes|no
    |oh|ah|well|now|then|there|here|today|tonight|tomorrow|yesterday|also|despite|unlike
    |according|born|located|founded|based|following|including|known|named|like|see|let
    |chapter|section|part|volume|stave|page|figure|table|illustration|note|notes|preface
    |contents|introduction|appendix|index|title|author|edition|release|language|credits
    |lord|god|sir|madam|ma'am|mister|miss|yes|nay|aye|hallo|hello|hullo|ha|ho|eh|bah|humbug
    |come|go|look|hear|behold|pooh|whereat|whereupon|wherefore|thereupon|heaven|transcriber
    |one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|hundred|thousand|first
    |second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|i'll|i'm|i'd|i've|o'clock
    |inc|inc.|ltd|ltd.|co.|corp.|llc|jr.|jr|sr.|sr|tv|fm|am|pm|bc|ad|bce|ce|dvd|cd|mw|kw|mhz
    |khz|km|mph|gdp|ceo|ok|ii|iii|iv|vi|vii|viii|ix|xi|xii|mr|mrs|dr|st.|no.|vol.|pp.
    |январь|февраль|март|апрель|май|июнь|июль|август|сентябрь|октябрь|ноябрь|декабрь
    |января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря
    |понедельник|вторник|среда|четверг|пятница|суббота|воскресенье|однако|также|кроме
    |после|перед|когда|где|что|который|которая|которые|здесь|сегодня|вчера|завтра|глава"""
)
