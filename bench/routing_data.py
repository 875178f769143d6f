"""Hand-written, labelled intent-routing dataset for a customer-support desk of an online electronics shop.

Languages: English ("en"), Simplified Chinese ("zh") and Hebrew ("he").

* ``EXAMPLES`` holds the in-language utterances a router is built from (8 per route per language).
* ``TESTS`` holds held-out labelled queries: 30 per route plus 30 off-topic (label ``None``) per language,
  in two batches. ``TESTS_V1`` (15 per route, 20 off-topic) is the batch parameters were chosen on;
  ``TESTS_V2`` (15 per route, 10 off-topic) was written afterwards and adds very short messages,
  typos, mixed-language messages and off-topic near misses. Off-topic queries must be rejected, not
  routed to any of the four agents.

Run this file directly to validate counts, labels and example/test separation.
"""

from __future__ import annotations

ROUTES = ["orders", "after_sales", "tech_support", "human"]

DESCRIPTIONS = {
    "orders": "Placing, tracking, changing, cancelling or paying for an order, its delivery and its invoice.",
    "after_sales": "Returns, refunds, exchanges, warranty claims and damaged, defective or wrong items received.",
    "tech_support": "Devices or the app not working: setup, pairing, Wi-Fi/Bluetooth, errors, updates, login, battery.",
    "human": "The customer explicitly asks for a human agent, representative or manager instead of a bot.",
}

# In-language route examples ("utterances") the router is built from.
EXAMPLES = {
    "en": {
        "orders": [
            "Where is my order?",
            "Can you give me the tracking number for my order?",
            "When will my package be delivered?",
            "I need to change the shipping address on my order.",
            "Please cancel my order, it hasn't shipped yet.",
            "My payment failed at checkout.",
            "How do I get an invoice for my purchase?",
            "I want to add another item to my order before it ships.",
        ],
        "after_sales": [
            "I want to return the headphones I bought.",
            "How do I get a refund?",
            "Can I exchange this for a different color?",
            "The item arrived damaged.",
            "I received the wrong product.",
            "I'd like to make a warranty claim for my laptop.",
            "My refund still hasn't come through.",
            "The speaker I received is defective and I want a replacement.",
        ],
        "tech_support": [
            "My headphones won't pair with my phone.",
            "How do I set up my new smart speaker?",
            "The device can't connect to Wi-Fi.",
            "I'm getting an error code on my device.",
            "How do I update the firmware?",
            "I can't log in to the app.",
            "My tablet won't charge.",
            "The app keeps crashing when I open it.",
        ],
        "human": [
            "I want to talk to a human.",
            "Can I speak to a real person please?",
            "Connect me with an agent.",
            "I'd like to speak with a customer service representative.",
            "Let me talk to your manager.",
            "I don't want to chat with a bot.",
            "Is there a live agent available?",
            "Transfer me to someone who can actually help.",
        ],
    },
    "zh": {
        "orders": [
            "我的订单到哪了？",
            "能给我一下订单的快递单号吗",
            "我的包裹什么时候能送到？",
            "我想修改订单的收货地址",
            "订单还没发货，帮我取消一下",
            "付款的时候一直显示支付失败",
            "怎么给这笔订单开发票？",
            "下单后还能再加一件商品吗？",
        ],
        "after_sales": [
            "我想退货",
            "退款怎么申请？",
            "这个耳机能换个颜色吗",
            "收到的东西外包装破了，里面也摔坏了",
            "你们发错货了",
            "笔记本还在保修期内，我想申请保修",
            "退款到现在还没到账",
            "刚买的音箱有质量问题，要求换新",
        ],
        "tech_support": [
            "耳机连不上手机蓝牙",
            "新买的智能音箱怎么设置？",
            "设备连不上WiFi",
            "屏幕上出现一个错误代码",
            "固件怎么升级？",
            "App登录不上去",
            "平板充不进电",
            "App一打开就闪退",
        ],
        "human": [
            "帮我转人工服务",
            "我要找人工客服",
            "能让真人跟我说话吗",
            "帮我接一下客服代表",
            "叫你们经理来",
            "我不想跟机器人聊",
            "现在有在线的人工客服吗？",
            "给我转个能解决问题的人",
        ],
    },
    "he": {
        "orders": [
            "איפה ההזמנה שלי?",
            "אפשר לקבל מספר מעקב להזמנה?",
            "מתי החבילה שלי תגיע?",
            "אני צריך לשנות את כתובת המשלוח בהזמנה",
            "תבטלו לי את ההזמנה, היא עוד לא נשלחה",
            "התשלום נכשל בקופה",
            "איך אני מקבל חשבונית על ההזמנה?",
            "אני רוצה להוסיף עוד מוצר להזמנה לפני שהיא יוצאת",
        ],
        "after_sales": [
            "אני רוצה להחזיר את האוזניות שקניתי",
            "איך מקבלים החזר כספי?",
            "אפשר להחליף את זה לצבע אחר?",
            "המוצר הגיע שבור",
            "קיבלתי מוצר לא נכון",
            "אני רוצה לפתוח קריאת שירות במסגרת האחריות על הלפטופ",
            "ההחזר הכספי עדיין לא נכנס לי",
            "הרמקול שקיבלתי פגום ואני רוצה אחד חדש במקומו",
        ],
        "tech_support": [
            "האוזניות לא מתחברות לטלפון בבלוטות'",
            "איך מגדירים את הרמקול החכם החדש?",
            "המכשיר לא מתחבר לוויי-פיי",
            "מופיע לי קוד שגיאה על המסך",
            "איך מעדכנים את הקושחה?",
            "אני לא מצליח להתחבר לאפליקציה",
            "הטאבלט לא נטען",
            "האפליקציה קורסת כל פעם שאני פותח אותה",
        ],
        "human": [
            "אני רוצה לדבר עם נציג",
            "אפשר לדבר עם בן אדם אמיתי בבקשה?",
            "תעבירו אותי לנציג שירות",
            "יש מישהו אנושי שאני יכול לדבר איתו?",
            "תן לי לדבר עם מנהל",
            "אני לא רוצה לדבר עם בוט",
            "יש נציג זמין בצ'אט?",
            "תחבר אותי למישהו שבאמת יכול לעזור",
        ],
    },
}

# Held-out labelled queries: (language, route or None, text). None = off-topic, must be rejected.
# First batch: 15 per route and 20 off-topic per language. The router's built-in parameters
# (AUTO_THRESHOLD_FACTOR, the uncertain band, the recommended mix) were chosen on this batch only.
TESTS_V1 = [
    # ------------------------------------------------------------------ English
    # orders
    ("en", "orders", "where is my package, it was supposed to arrive monday"),
    ("en", "orders", "tracking??"),
    ("en", "orders", "ORDER #48213 STILL SAYS PROCESSING AFTER 6 DAYS. WHAT IS GOING ON"),
    (
        "en",
        "orders",
        "hi, i moved last week and just realised the laptop i ordered is going to my old apartment, "
        "can you send it to the new place instead",
    ),
    ("en", "orders", "pls cancle what i bought this morning, pretty sure it hasnt left yet"),
    ("en", "orders", "My card keeps getting declined when I try to pay, but it works everywhere else."),
    ("en", "orders", "I need a VAT invoice for the monitor my company bought from you last month."),
    ("en", "orders", "Is it possible to swap the black keyboard in my order for the white one before you dispatch it?"),
    ("en", "orders", "when will my stuff get here"),
    ("en", "orders", "The courier site says 'delivery exception' - what does that mean for my parcel?"),
    ("en", "orders", "Can I buy two of the 65-inch TVs from you and pay in installments?"),
    ("en", "orders", "Confirmation email never arrived, did my purchase even go through?"),
    (
        "en",
        "orders",
        "Hello, I'm sorry to bother you, but could you tell me the estimated delivery date for no. 77120? "
        "Thank you so much.",
    ),
    (
        "en",
        "orders",
        "ordered a charger 2 weeks ago and tracking hasnt updated since it left the warehouse, is it lost??",
    ),
    ("en", "orders", "I accidentally ordered the same camera twice, please cancel one of them."),
    # after_sales
    ("en", "after_sales", "refund??"),
    ("en", "after_sales", "I'm still waiting for my money back, it's been three weeks since you got the return."),
    ("en", "after_sales", "I want to send it back because it doesn't turn on"),
    ("en", "after_sales", "the box was crushed and the screen is cracked right out of the packaging"),
    ("en", "after_sales", "you sent me a pink phone case, i ordered blue. how do i get the right one"),
    ("en", "after_sales", "Is my robot vacuum still under warranty? It's 18 months old and the motor just died."),
    ("en", "after_sales", "Can I swap these earbuds for the bigger model? I've only opened the box."),
    ("en", "after_sales", "THIS IS THE SECOND DEFECTIVE KEYBOARD YOU HAVE SENT ME. I WANT MY MONEY BACK."),
    ("en", "after_sales", "how long do refunds usually take to show up on a credit card"),
    ("en", "after_sales", "Bought a smartwatch as a gift, my dad doesn't like it. What's your return policy?"),
    ("en", "after_sales", "The monitor has a bunch of dead pixels, I'd like a new unit please."),
    ("en", "after_sales", "got the package today but theres a toaster inside instead of my router lol"),
    ("en", "after_sales", "Need a return label for order 55102."),
    ("en", "after_sales", "You approved my warranty repair two weeks ago and nobody has picked up the laptop yet."),
    ("en", "after_sales", "The money you refunded me was $40 short of what I paid."),
    # tech_support
    ("en", "tech_support", "the replacement you sent me won't pair with my phone"),
    ("en", "tech_support", "wifi keeps dropping on the smart plug"),
    ("en", "tech_support", "My speaker shows E-07 and blinks red, what does that mean?"),
    ("en", "tech_support", "Forgot my password for the app and the reset email never comes."),
    ("en", "tech_support", "how do i connect my new earbuds to a windows laptop"),
    ("en", "tech_support", "The firmware update got stuck at 60% and now the camera won't boot."),
    ("en", "tech_support", "Battery drains from full to zero in like two hours, is that normal?"),
    ("en", "tech_support", "APP CRASHES EVERY TIME I GO INTO SETTINGS"),
    ("en", "tech_support", "bluetooth not working"),
    (
        "en",
        "tech_support",
        "I just unboxed the doorbell and I have no idea how to mount it and get it online, help",
    ),
    ("en", "tech_support", "Hey, quick question, is there a way to turn off the blue light on the router at night?"),
    ("en", "tech_support", "My tablet is stuck on the logo screen after restarting."),
    ("en", "tech_support", "The watch won't charge unless I hold the cable at a weird angle."),
    ("en", "tech_support", "app says 'session expired' every time i try to sign in, so annoying"),
    ("en", "tech_support", "Can't get the printer to show up on my network, I've restarted everything twice."),
    # human
    ("en", "human", "agent"),
    ("en", "human", "HUMAN PLEASE"),
    ("en", "human", "I've been going in circles with this chatbot for 20 minutes, get me a real person."),
    ("en", "human", "Is there someone I can actually call?"),
    ("en", "human", "I want your supervisor on the line right now."),
    ("en", "human", "can i talk to someone pls"),
    ("en", "human", "Stop answering me with canned responses. I want a person."),
    ("en", "human", "Please escalate this to a representative, thank you."),
    ("en", "human", "are you a robot? I'd prefer a human being"),
    ("en", "human", "Put me through to customer service, a real one."),
    ("en", "human", "not interested in chatting with a machine, sorry"),
    ("en", "human", "Could you get me a live operator? My issue is complicated."),
    ("en", "human", "My refund is late and I'm done with this bot, give me a human."),
    ("en", "human", "Who's in charge there? I want to complain to a manager."),
    ("en", "human", "representitive"),
    # off-topic
    ("en", None, "what's the weather like in London tomorrow"),
    ("en", None, "give me a recipe for banana bread"),
    ("en", None, "who won the champions league final last year"),
    ("en", None, "tell me a joke"),
    ("en", None, "What is the capital of Australia?"),
    ("en", None, "can you help me with my algebra homework, solve 3x + 5 = 20"),
    ("en", None, "Who should I vote for in the next election?"),
    ("en", None, "Write me a poem about autumn."),
    ("en", None, "How do meteorologists track a hurricane's path?"),
    ("en", None, "how are you today"),
    ("en", None, "What was the best phone you could buy in 1995?"),
    ("en", None, "Explain how a tax refund anticipation loan works."),
    ("en", None, "How many calories are in a cup of rice?"),
    ("en", None, "translate 'good morning' into Italian"),
    ("en", None, "Why is Bluetooth named after a Viking king?"),
    ("en", None, "What's a good name for a golden retriever puppy?"),
    ("en", None, "how much does a delivery driver earn a year in the UK"),
    ("en", None, "How do I return a serve in tennis?"),
    ("en", None, "recommend me a good sci-fi movie for tonight"),
    ("en", None, "what time is it in Tokyo right now"),
    # ------------------------------------------------------------------ Chinese (Simplified)
    # orders
    ("zh", "orders", "快递咋还没到啊，说好周一送的"),
    ("zh", "orders", "单号多少？"),
    ("zh", "orders", "我昨天买的东西物流信息一直不更新，是不是丢件了"),
    ("zh", "orders", "您好，麻烦问一下20231108这一单预计哪天送达，谢谢您"),
    ("zh", "orders", "刚搬家了，地址填的是老房子，能改成新地址不？应该还没寄出"),
    ("zh", "orders", "结账的时候银行卡一直被拒，换了张卡也不行"),
    ("zh", "orders", "公司报销需要增值税专用发票，上个月买的显示器"),
    ("zh", "orders", "不小心重复下单了两台相机，取消一个"),
    ("zh", "orders", "鼠标数量写错了，应该是两个不是一个，现在改还来得及吗"),
    ("zh", "orders", "我想买三台你们的65寸电视，能分期吗"),
    ("zh", "orders", "物流显示派送异常，这是啥情况"),
    ("zh", "orders", "付完钱了没收到确认短信，到底买成功没"),
    ("zh", "orders", "还在运输中？？都五天了"),
    ("zh", "orders", "能不能周末配送，工作日家里没人"),
    ("zh", "orders", "一直显示待付款，可是我钱已经扣了"),
    # after_sales
    ("zh", "after_sales", "退款呢？？"),
    ("zh", "after_sales", "东西寄回去都三个礼拜了，钱还没退给我"),
    ("zh", "after_sales", "开不了机，我要退"),
    ("zh", "after_sales", "箱子压扁了，拿出来屏幕就是裂的"),
    ("zh", "after_sales", "我买的是蓝色手机壳，结果给我发来个粉的，咋办"),
    ("zh", "after_sales", "扫地机器人用了一年半，电机坏了，能走保修吗"),
    ("zh", "after_sales", "这款耳塞能换成大一号的型号吗？就拆了个包装"),
    ("zh", "after_sales", "第二次给我发有问题的键盘了！！！退钱！"),
    ("zh", "after_sales", "钱一般多久能退到信用卡上"),
    ("zh", "after_sales", "买了个手表送我爸，他不喜欢，七天无理由能退吗"),
    ("zh", "after_sales", "显示器上好多坏点，麻烦给我重新发一台"),
    ("zh", "after_sales", "拆开快递一看，里面是个电饭煲，我买的是路由器啊"),
    ("zh", "after_sales", "55102那单的退货运单号填在哪？运费谁出"),
    ("zh", "after_sales", "维修申请都批了两周了，也没人来取件"),
    ("zh", "after_sales", "退给我的钱比我付的少了四十块"),
    # tech_support
    ("zh", "tech_support", "你们换给我的新耳机还是配对不上我手机"),
    ("zh", "tech_support", "智能插座WiFi老掉线"),
    ("zh", "tech_support", "音箱一直闪红灯，还显示E-07"),
    ("zh", "tech_support", "App密码忘了，重置邮件一直收不到"),
    ("zh", "tech_support", "新耳塞咋连Windows电脑"),
    ("zh", "tech_support", "固件更新卡在60%不动了，现在摄像头开不了机"),
    ("zh", "tech_support", "电池满电两个小时就没了，正常吗？"),
    ("zh", "tech_support", "点进设置页面APP就崩溃"),
    ("zh", "tech_support", "蓝牙用不了"),
    ("zh", "tech_support", "门铃刚拆箱，不知道怎么装，也不知道咋联网，求助"),
    ("zh", "tech_support", "路由器晚上那个蓝灯能关掉不？太亮了"),
    ("zh", "tech_support", "平板重启后一直卡在开机logo"),
    ("zh", "tech_support", "手表充电线得掐着角度才能充上"),
    ("zh", "tech_support", "每次登App都提示会话已过期，烦死了"),
    ("zh", "tech_support", "打印机在局域网里搜不到，路由器和打印机都重启过了"),
    # human
    ("zh", "human", "人工"),
    ("zh", "human", "人工！！！人工！！！"),
    ("zh", "human", "跟这个智能客服绕了二十分钟了，给我找个真人"),
    ("zh", "human", "有没有电话可以直接打过去的？"),
    ("zh", "human", "我现在就要跟你们主管谈"),
    ("zh", "human", "可以安排个工作人员和我沟通吗"),
    ("zh", "human", "别老回复我这些模板话术了，我要找人"),
    ("zh", "human", "麻烦帮我升级给专员处理，谢谢"),
    ("zh", "human", "你是AI吧？换个活人来"),
    ("zh", "human", "转接客服，要真人的"),
    ("zh", "human", "别用机器回复糊弄我了"),
    ("zh", "human", "能接个在线坐席吗？我这问题比较复杂，说不清楚"),
    ("zh", "human", "退款迟迟不到，我受够这个机器人了，转人工"),
    ("zh", "human", "你们负责人是谁？我要投诉"),
    ("zh", "human", "喂，有人在吗？不要自动回复的那种"),
    # off-topic
    ("zh", None, "今天北京天气怎么样"),
    ("zh", None, "红烧肉怎么做好吃"),
    ("zh", None, "昨晚湖人赢了没"),
    ("zh", None, "讲个笑话呗"),
    ("zh", None, "澳大利亚的首都是哪儿？"),
    ("zh", None, "帮我解个方程：3x+5=20，作业明天要交"),
    ("zh", None, "你觉得美国大选谁会赢"),
    ("zh", None, "写一首关于秋天的诗"),
    ("zh", None, "台风路径在哪能实时追踪"),
    ("zh", None, "你今天心情好吗"),
    ("zh", None, "1995年最好的手机是哪款"),
    ("zh", None, "个人所得税年度汇算退税要多久到账"),
    ("zh", None, "一碗米饭多少卡路里"),
    ("zh", None, "早上好用意大利语怎么说"),
    ("zh", None, "蓝牙为什么叫蓝牙？跟那个国王有啥关系"),
    ("zh", None, "金毛小狗取个啥名字好听"),
    ("zh", None, "人真的只用了大脑的10%吗"),
    ("zh", None, "推荐一部今晚能看的科幻片"),
    ("zh", None, "东京现在几点"),
    ("zh", None, "快递员这个职业一个月能挣多少钱"),
    # ------------------------------------------------------------------ Hebrew
    # orders
    ("he", "orders", "איפה החבילה? הייתה אמורה להגיע ביום שני"),
    ("he", "orders", "מספר מעקב??"),
    ("he", "orders", "ההזמנה שלי תקועה על 'בטיפול' כבר שישה ימים, מה קורה?"),
    (
        "he",
        "orders",
        "היי, עברתי דירה בשבוע שעבר ורק עכשיו קלטתי שהמחשב שהזמנתי הולך לכתובת הישנה. אפשר לשלוח לדירה החדשה?",
    ),
    ("he", "orders", "תבטלו את מה שהזמנתי הבוקר בבקשה"),
    ("he", "orders", "הכרטיס אשראי שלי נדחה כל פעם שאני מנסה לשלם, ובכל מקום אחר הוא עובד"),
    ("he", "orders", "צריך חשבונית מס על המסך שהחברה קנתה אצלכם בחודש שעבר"),
    ("he", "orders", "הזמנתי בטעות את אותה מצלמה פעמיים, תבטלו אחת מהן"),
    ("he", "orders", "מתי זה מגיע כבר"),
    ("he", "orders", "באתר של השליח כתוב 'חריגה במשלוח', מה זה אומר?"),
    ("he", "orders", "אפשר להזמין דרככם שתי טלוויזיות 65 אינץ' ולשלם בתשלומים?"),
    ("he", "orders", "לא קיבלתי מייל אישור, הרכישה בכלל עברה?"),
    ("he", "orders", "שלום, סליחה על הטרחה, תוכלו לבדוק מה תאריך המסירה המשוער של 77120? תודה רבה"),
    ("he", "orders", "הזמנתי מטען לפני שבועיים והמעקב לא זז מאז שיצא מהמחסן, הלך לאיבוד??"),
    ("he", "orders", "אפשר שהשליח יגיע בשישי? באמצע השבוע אין אף אחד בבית"),
    # after_sales
    ("he", "after_sales", "החזר??"),
    ("he", "after_sales", "אני עדיין מחכה לכסף שלי, כבר שלושה שבועות מאז שקיבלתם את המוצר בחזרה"),
    ("he", "after_sales", "בא לי להחזיר את המכשיר, הוא פשוט לא נדלק"),
    ("he", "after_sales", "הקרטון היה מעוך והמסך יצא סדוק ישר מהאריזה"),
    ("he", "after_sales", "הזמנתי כיסוי כחול ושלחתם לי ורוד. מה עושים עכשיו?"),
    ("he", "after_sales", "לשואב הרובוטי שלי יש שנה וחצי, המנוע מת. זה עדיין באחריות?"),
    ("he", "after_sales", "אפשר להחליף את האוזניות לדגם הגדול יותר? רק פתחתי את הקופסה"),
    ("he", "after_sales", "זו המקלדת השנייה הפגומה שאתם שולחים לי!!! אני רוצה את הכסף בחזרה"),
    ("he", "after_sales", "כמה זמן לוקח לזיכוי להופיע בכרטיס אשראי?"),
    ("he", "after_sales", "קניתי שעון חכם מתנה לאבא שלי והוא לא אהב. מה מדיניות ההחזרות שלכם?"),
    ("he", "after_sales", "יש במסך המון פיקסלים מתים, אפשר לקבל מסך חלופי?"),
    ("he", "after_sales", "פתחתי את החבילה ויש בה טוסטר במקום הראוטר שהזמנתי חחח"),
    ("he", "after_sales", "איך מדפיסים תווית החזרה להזמנה 55102?"),
    ("he", "after_sales", "אישרתם לי תיקון באחריות לפני שבועיים ואף אחד לא בא לאסוף את הלפטופ"),
    ("he", "after_sales", "קיבלתי זיכוי של 40 שקל פחות ממה ששילמתי"),
    # tech_support
    ("he", "tech_support", "המכשיר החלופי ששלחתם לא מתחבר לטלפון שלי"),
    ("he", "tech_support", "השקע החכם כל הזמן מתנתק מהוויי-פיי"),
    ("he", "tech_support", "הרמקול מהבהב באדום וכתוב E-07, מה זה?"),
    ("he", "tech_support", "שכחתי סיסמה לאפליקציה ומייל האיפוס לא מגיע"),
    ("he", "tech_support", "איך מחברים את האוזניות החדשות ללפטופ עם ווינדוס"),
    ("he", "tech_support", "עדכון הקושחה נתקע על 60% ועכשיו המצלמה לא עולה"),
    ("he", "tech_support", "הסוללה יורדת מ-100% לאפס תוך שעתיים, זה נורמלי?"),
    ("he", "tech_support", "האפליקציה נופלת לי ברגע שאני נכנס להגדרות"),
    ("he", "tech_support", "בלוטות' לא עובד"),
    (
        "he",
        "tech_support",
        "הרגע הוצאתי את הפעמון החכם מהקופסה ואין לי מושג איך להתקין אותו ולחבר לרשת, הצילו",
    ),
    ("he", "tech_support", "אפשר לכבות את הנורה הכחולה של הראוטר בלילה? מסנוור"),
    ("he", "tech_support", "הטאבלט נתקע על הלוגו אחרי ריסטארט"),
    ("he", "tech_support", "השעון נטען רק אם אני מחזיק את הכבל בזווית מסוימת"),
    ("he", "tech_support", "כל פעם שאני מנסה להיכנס לאפליקציה כתוב לי 'פג תוקף החיבור', מעצבן"),
    ("he", "tech_support", "המדפסת לא מופיעה ברשת, כבר עשיתי ריסטארט לכל הציוד פעמיים"),
    # human
    ("he", "human", "נציג"),
    ("he", "human", "נציג אנושי!!!"),
    ("he", "human", "אני כבר 20 דקות מסתובב במעגלים עם הצ'אטבוט הזה, תביאו לי בן אדם"),
    ("he", "human", "יש מספר טלפון שאפשר להתקשר ולדבר עם מישהו?"),
    ("he", "human", "תעביר אותי עכשיו לאחראי משמרת"),
    ("he", "human", "תנו לי מישהו לדבר איתו בבקשה"),
    ("he", "human", "די עם התשובות המוכנות, אני רוצה בן אדם"),
    ("he", "human", "תעבירו את הפנייה שלי לנציג בבקשה, תודה"),
    ("he", "human", "אתה רובוט? הייתי מעדיף בנאדם"),
    ("he", "human", "תעבירו אותי לשירות לקוחות, אבל אמיתי"),
    ("he", "human", "אין לי כוח להתכתב עם מכונה"),
    ("he", "human", "אפשר לקבל נציג בצ'אט חי? הבעיה שלי מסובכת"),
    ("he", "human", "ההחזר מתעכב ונמאס לי מהבוט הזה, תנו לי בן אדם"),
    ("he", "human", "מי המנהל שם? אני רוצה להגיש תלונה"),
    ("he", "human", "נציגגג בבקשהה"),
    # off-topic
    ("he", None, "מה מזג האוויר מחר בתל אביב?"),
    ("he", None, "תן לי מתכון לשקשוקה"),
    ("he", None, "מי ניצח בדרבי אתמול?"),
    ("he", None, "ספר לי בדיחה"),
    ("he", None, "מה בירת אוסטרליה?"),
    ("he", None, "תעזור לי בשיעורי בית במתמטיקה, איך פותרים 3x+5=20"),
    ("he", None, "למי כדאי להצביע בבחירות הבאות?"),
    ("he", None, "תכתוב לי שיר על הסתיו"),
    ("he", None, "איך עוקבים אחרי המסלול של הוריקן?"),
    ("he", None, "מה נשמע? איך עבר עליך היום?"),
    ("he", None, "מה היה הטלפון הכי טוב בשנת 1995?"),
    ("he", None, "מגיע לי החזר מס על השנים האחרונות?"),
    ("he", None, "כמה קלוריות יש בכוס אורז?"),
    ("he", None, "איך אומרים 'בוקר טוב' באיטלקית?"),
    ("he", None, "למה הבלוטות' נקרא על שם מלך ויקינגי?"),
    ("he", None, "איזה שם כדאי לתת לגור גולדן?"),
    ("he", None, "זה נכון שאנחנו משתמשים רק ב-10% מהמוח?"),
    ("he", None, "תמליץ לי על סרט מדע בדיוני טוב להערב"),
    ("he", None, "מה השעה עכשיו בטוקיו?"),
    ("he", None, "כמה מרוויח שליח בחודש?"),
]


# Second batch, written later and never used to choose a parameter (see bench/routing.py): 15 more
# per route and 10 more off-topic per language. It adds very short messages, typos, messages that mix
# two languages, and off-topic near misses: another company's support question, a tax refund, a
# joke about support bots, a stolen bank card, "ok" and "thanks, bye".
TESTS_V2 = [
    # ------------------------------------------------------------------ English
    ("en", "orders", "order status"),
    ("en", "orders", "cancel pls"),
    ("en", "orders", "wher is my oder"),
    ("en", "orders", "Can I pick up my order from a store instead of having it delivered?"),
    ("en", "orders", "The delivery guy left my parcel with a neighbour I don't know, how do I find it?"),
    ("en", "orders", "I paid with PayPal but the order still shows unpaid."),
    ("en", "orders", "Do you ship to Canada, and how much would shipping be for a laptop?"),
    ("en", "orders", "Could you combine my two orders into one shipment?"),
    ("en", "orders", "It says delivered but there's nothing at my door."),
    ("en", "orders", "need to fix a typo in the apartment number before it goes out"),
    ("en", "orders", "How do I use a discount code on a purchase I already placed?"),
    ("en", "orders", "my order got split into 3 packages and only 2 came"),
    ("en", "orders", "Can you hold my delivery until I'm back from vacation on the 14th?"),
    ("en", "orders", "hi, my order 还没到, it's been a week"),
    ("en", "orders", "how long after I buy something do you send it out"),
    ("en", "after_sales", "refund pls"),
    ("en", "after_sales", "return"),
    ("en", "after_sales", "the hedphones stopped working after a week, can i get a replacment"),
    ("en", "after_sales", "The laptop you sent has a UK plug but I live in Germany, I want to exchange it."),
    ("en", "after_sales", "Who pays the shipping when I send back a faulty item?"),
    ("en", "after_sales", "One of the two speakers in the set doesn't make any sound."),
    ("en", "after_sales", "Can I return an opened item if I still have the receipt?"),
    ("en", "after_sales", "my refund went to an old card that's been cancelled, what now"),
    ("en", "after_sales", "The charger smells like burning plastic, I want my money back."),
    ("en", "after_sales", "I was charged a restocking fee on my return and nobody told me about that."),
    ("en", "after_sales", "Does the extended warranty cover water damage on the phone?"),
    ("en", "after_sales", "screen came with a scratch right across the middle"),
    ("en", "after_sales", "Bought a TV last week and it's now $100 cheaper, can I get the difference back?"),
    ("en", "after_sales", "I dropped off the return at the post office 10 days ago, has it reached you?"),
    ("en", "after_sales", "I sent the mouse back but the 退款 hasn't arrived"),
    ("en", "tech_support", "wifi"),
    ("en", "tech_support", "cant login"),
    ("en", "tech_support", "the app wont let me sing in, says invalid credentails"),
    ("en", "tech_support", "How do I factory reset the smart speaker?"),
    ("en", "tech_support", "Sound cuts out on my earbuds every few seconds during calls."),
    ("en", "tech_support", "After the latest update my phone no longer recognises the smartwatch."),
    ("en", "tech_support", "The camera's night vision image is completely black."),
    ("en", "tech_support", "Is the router compatible with fiber internet from my provider?"),
    ("en", "tech_support", "keyboard types the wrong characters, like @ instead of quotes"),
    ("en", "tech_support", "two-factor code never arrives on my phone when I sign into the app"),
    ("en", "tech_support", "My laptop fan is really loud all the time even when it's idle."),
    ("en", "tech_support", "How can I share the doorbell camera with my wife's account?"),
    ("en", "tech_support", "the remote for the TV box isn't responding even with new batteries"),
    ("en", "tech_support", "Where do I download the drivers for the USB-C dock?"),
    ("en", "tech_support", "the app switched to Hebrew, how do I change the language back to English"),
    ("en", "human", "operator"),
    ("en", "human", "a person please"),
    ("en", "human", "speak to somone real"),
    ("en", "human", "This is ridiculous, I need to talk to an actual employee."),
    ("en", "human", "I want to make a complaint to a person, not an automated system."),
    ("en", "human", "Can someone from your team call me back at 555-0142?"),
    ("en", "human", "Please transfer this chat to a live person."),
    ("en", "human", "bot is useless. human."),
    ("en", "human", "Is there a phone number for customer support? I'd rather talk."),
    ("en", "human", "Get me someone from management."),
    ("en", "human", "I'd like to speak to somebody who speaks Hebrew."),
    ("en", "human", "Let me chat with a real support agent, this is urgent"),
    ("en", "human", "no more automated answers, please connect me to staff"),
    ("en", "human", "can a human look at my case? the bot keeps misunderstanding me"),
    ("en", "human", "人工 please"),
    ("en", None, "How do I get a refund from my airline for a cancelled flight?"),
    ("en", None, "My Netflix account was hacked, how do I reset my password?"),
    ("en", None, "When will I receive my tax refund from the IRS?"),
    ("en", None, "Tell me a joke about a customer service robot."),
    ("en", None, "My bank card was stolen, how do I block it?"),
    ("en", None, "how do I track a package I sent my mom with the post office?"),
    ("en", None, "ok"),
    ("en", None, "thanks, bye"),
    ("en", None, "Is the Amazon Prime return window 30 days?"),
    ("en", None, "How do I fix a leaking kitchen tap?"),
    # ------------------------------------------------------------------ Chinese (Simplified)
    ("zh", "orders", "查物流"),
    ("zh", "orders", "取消订单"),
    ("zh", "orders", "我买的东西到那了"),
    ("zh", "orders", "能不能改成到店自提，不用送货上门"),
    ("zh", "orders", "快递员把包裹放在邻居家了，我不认识那家人怎么办"),
    ("zh", "orders", "用支付宝付过钱了，订单还显示未支付"),
    ("zh", "orders", "你们发不发香港？运费多少"),
    ("zh", "orders", "两个订单能合在一起发吗"),
    ("zh", "orders", "显示已签收，但我根本没收到东西"),
    ("zh", "orders", "门牌号写错了一位，发货前帮我改一下"),
    ("zh", "orders", "优惠券下单的时候忘了用，现在还能补吗"),
    ("zh", "orders", "订单拆成三个包裹，只到了两个"),
    ("zh", "orders", "我下周出差，快递能不能晚几天再送"),
    ("zh", "orders", "这个order什么时候能发货？"),
    ("zh", "orders", "下单后多久发货"),
    ("zh", "after_sales", "退款"),
    ("zh", "after_sales", "退货"),
    ("zh", "after_sales", "我想推货，怎么弄"),
    ("zh", "after_sales", "笔记本电脑的插头是英标的，我这边用不了，想换一台"),
    ("zh", "after_sales", "质量问题退回去，运费你们出吗"),
    ("zh", "after_sales", "套装里两个音箱有一个不响"),
    ("zh", "after_sales", "拆封了还能退吗？发票还在"),
    ("zh", "after_sales", "退款退到了我注销的那张卡上，怎么办"),
    ("zh", "after_sales", "充电器有一股烧焦的塑料味，我要退钱"),
    ("zh", "after_sales", "退货被扣了手续费，之前也没人跟我说"),
    ("zh", "after_sales", "延保包不包手机进水"),
    ("zh", "after_sales", "屏幕中间有一道划痕，刚拆开就有"),
    ("zh", "after_sales", "上周买的电视这周降价一百，能退差价吗"),
    ("zh", "after_sales", "退货十天前就寄出去了，你们收到了吗"),
    ("zh", "after_sales", "我的refund什么时候到账"),
    ("zh", "tech_support", "无线网一直断"),
    ("zh", "tech_support", "账号进不去"),
    ("zh", "tech_support", "app老是闪腿"),
    ("zh", "tech_support", "音箱想重置成出厂状态，按哪个键"),
    ("zh", "tech_support", "打电话的时候耳机声音断断续续"),
    ("zh", "tech_support", "手机升级系统以后不认手表了"),
    ("zh", "tech_support", "摄像头晚上夜视画面全黑"),
    ("zh", "tech_support", "这个路由器支持光纤宽带吗"),
    ("zh", "tech_support", "键盘打出来的字符不对"),
    ("zh", "tech_support", "登录App收不到验证码短信"),
    ("zh", "tech_support", "笔记本风扇一直狂转，啥也没开也很吵"),
    ("zh", "tech_support", "门铃摄像头怎么共享给家里人"),
    ("zh", "tech_support", "电视盒子的遥控器换了新电池还是没反应"),
    ("zh", "tech_support", "USB-C扩展坞的驱动在哪下载"),
    ("zh", "tech_support", "app的语言变成英文了，怎么改回中文"),
    ("zh", "human", "客服在吗"),
    ("zh", "human", "找个真人客服"),
    ("zh", "human", "我要投诉，叫个人来处理"),
    ("zh", "human", "麻烦让工作人员给我回个电话"),
    ("zh", "human", "把这个对话转给在线客服"),
    ("zh", "human", "机器人没用，要人"),
    ("zh", "human", "客服电话是多少？我想直接打电话说"),
    ("zh", "human", "叫你们领导出来"),
    ("zh", "human", "我想找会说粤语的客服"),
    ("zh", "human", "这事很急，赶紧给我接个客服"),
    ("zh", "human", "别再自动回复了，帮我接个员工"),
    ("zh", "human", "能不能让人来看一下我的问题？机器人老是理解错"),
    ("zh", "human", "人工服务 please"),
    ("zh", "human", "我要跟活人说话"),
    ("zh", "human", "人公客服"),
    ("zh", None, "航班取消了，航空公司的退款多久能到"),
    ("zh", None, "网易云音乐账号被盗了怎么找回密码"),
    ("zh", None, "退税申请被驳回了怎么办"),
    ("zh", None, "讲个关于客服机器人的笑话"),
    ("zh", None, "银行卡丢了怎么挂失"),
    ("zh", None, "我给我妈寄了个邮政包裹，怎么查"),
    ("zh", None, "好的"),
    ("zh", None, "谢谢，再见"),
    ("zh", None, "淘宝的退货期是几天"),
    ("zh", None, "水龙头漏水怎么修"),
    # ------------------------------------------------------------------ Hebrew
    ("he", "orders", "סטטוס הזמנה"),
    ("he", "orders", "ביטול הזמנה"),
    ("he", "orders", "איפו ההזמנה"),
    ("he", "orders", "אפשר לאסוף את ההזמנה מהחנות במקום משלוח?"),
    ("he", "orders", "השליח השאיר את החבילה אצל שכן שאני לא מכיר, איך אני מוצא אותה?"),
    ("he", "orders", "שילמתי בפייפאל אבל ההזמנה עדיין מופיעה כלא שולמה"),
    ("he", "orders", "אתם שולחים לאילת? כמה עולה המשלוח?"),
    ("he", "orders", "אפשר לאחד את שתי ההזמנות שלי למשלוח אחד?"),
    ("he", "orders", "כתוב שנמסר אבל אין כלום ליד הדלת"),
    ("he", "orders", "טעיתי במספר הדירה, אפשר לתקן לפני שזה יוצא?"),
    ("he", "orders", "שכחתי להכניס קוד קופון, אפשר להוסיף עכשיו?"),
    ("he", "orders", "ההזמנה התפצלה לשלוש חבילות והגיעו רק שתיים"),
    ("he", "orders", 'אני בחו"ל עד ה-14, אפשר לדחות את המשלוח?'),
    ("he", "orders", "ה-order שלי עוד לא יצא מהמחסן"),
    ("he", "orders", "תוך כמה זמן אתם שולחים אחרי שמזמינים?"),
    ("he", "after_sales", "זיכוי"),
    ("he", "after_sales", "החזרה"),
    ("he", "after_sales", "המכשיר לא עובד כמו שצריח, אני רוצה להחזיר"),
    ("he", "after_sales", "הלפטופ הגיע עם תקע אנגלי, אני רוצה להחליף"),
    ("he", "after_sales", "מי משלם על המשלוח כשמחזירים מוצר פגום?"),
    ("he", "after_sales", "אחד משני הרמקולים בסט לא מוציא קול"),
    ("he", "after_sales", "אפשר להחזיר מוצר שנפתח אם יש לי קבלה?"),
    ("he", "after_sales", "הזיכוי נכנס לכרטיס ישן שכבר בוטל, מה עושים?"),
    ("he", "after_sales", "המטען מריח כמו פלסטיק שרוף, אני רוצה את הכסף שלי"),
    ("he", "after_sales", "חייבו אותי בדמי ביטול על ההחזרה ואף אחד לא אמר לי"),
    ("he", "after_sales", "האחריות המורחבת מכסה נזקי מים בטלפון?"),
    ("he", "after_sales", "המסך הגיע עם שריטה באמצע"),
    ("he", "after_sales", "קניתי טלוויזיה בשבוע שעבר ועכשיו היא זולה ב-300 שקל, אפשר לקבל את ההפרש?"),
    ("he", "after_sales", "שלחתי את ההחזרה בדואר לפני עשרה ימים, זה הגיע אליכם?"),
    ("he", "after_sales", "ה-refund שלי עוד לא הגיע"),
    ("he", "tech_support", "וויפי לא עובד"),
    ("he", "tech_support", "לא מצליח להיכנס"),
    ("he", "tech_support", "האפליקציה לא נותנת לי להיכנס, כתוב סיסמא שגויה"),
    ("he", "tech_support", "איך עושים איפוס להגדרות יצרן לרמקול החכם?"),
    ("he", "tech_support", "הקול באוזניות נקטע כל כמה שניות בשיחות"),
    ("he", "tech_support", "אחרי העדכון האחרון הטלפון לא מזהה את השעון"),
    ("he", "tech_support", "ראיית הלילה של המצלמה מראה מסך שחור לגמרי"),
    ("he", "tech_support", "הראוטר תומך בסיבים אופטיים של בזק?"),
    ("he", "tech_support", "המקלדת מקלידה תווים לא נכונים"),
    ("he", "tech_support", "קוד האימות לא מגיע לי ב-SMS כשאני נכנס לאפליקציה"),
    ("he", "tech_support", "המאוורר של הלפטופ רועש כל הזמן, גם כשהוא לא עושה כלום"),
    ("he", "tech_support", "איך משתפים את מצלמת הפעמון עם החשבון של אשתי?"),
    ("he", "tech_support", "השלט של הסטרימר לא מגיב גם עם סוללות חדשות"),
    ("he", "tech_support", "איפה מורידים דרייברים לתחנת העגינה USB-C?"),
    ("he", "tech_support", "ה-app נתקע על מסך טעינה"),
    ("he", "human", "מוקדן"),
    ("he", "human", "בנאדם בבקשה"),
    ("he", "human", "תעבירו לנצגי בבקשה"),
    ("he", "human", "זה מגוחך, אני צריך לדבר עם עובד אמיתי"),
    ("he", "human", "אני רוצה להתלונן בפני בן אדם, לא מערכת אוטומטית"),
    ("he", "human", "מישהו מהצוות יכול לחזור אליי בטלפון?"),
    ("he", "human", "תעבירו את השיחה לאדם חי"),
    ("he", "human", "הבוט לא שווה כלום. בן אדם."),
    ("he", "human", "יש מספר טלפון של שירות הלקוחות? אני מעדיף לדבר"),
    ("he", "human", "תביאו לי מישהו מההנהלה"),
    ("he", "human", "אני רוצה לדבר עם מישהו שמדבר רוסית"),
    ("he", "human", "דחוף, תחברו אותי לנציגה"),
    ("he", "human", "בלי תשובות אוטומטיות, תחברו אותי לצוות"),
    ("he", "human", "אפשר שבן אדם יסתכל על הפנייה? הבוט לא מבין אותי"),
    ("he", "human", "I want a human, לא בוט"),
    ("he", None, "הטיסה שלי בוטלה, תוך כמה זמן חברת התעופה מחזירה כסף?"),
    ("he", None, "חשבון הנטפליקס שלי נפרץ, איך משנים סיסמה?"),
    ("he", None, "מתי יגיע החזר המס ממס הכנסה?"),
    ("he", None, "ספר לי בדיחה על רובוט של שירות לקוחות"),
    ("he", None, "הכרטיס אשראי שלי נגנב, איך חוסמים אותו?"),
    ("he", None, "שלחתי חבילה לאמא שלי בדואר ישראל, איך עוקבים אחריה?"),
    ("he", None, "אוקיי"),
    ("he", None, "תודה, ביי"),
    ("he", None, "כמה ימים יש להחזיר מוצר באמזון?"),
    ("he", None, "איך מתקנים ברז שמטפטף?"),
]

TESTS = TESTS_V1 + TESTS_V2


def _tokens(lang: str, text: str) -> set[str]:
    """Words for en/he, characters for zh (lower-cased, punctuation dropped)."""
    text = text.lower()
    if lang == "zh":
        return {ch for ch in text if ch.isalnum()}
    cleaned = "".join(ch if ch.isalnum() or ch == "'" else " " for ch in text)
    return {w.strip("'") for w in cleaned.split() if w.strip("'")}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


if __name__ == "__main__":
    langs = list(EXAMPLES)
    assert langs == ["en", "zh", "he"], langs
    assert set(DESCRIPTIONS) == set(ROUTES), DESCRIPTIONS.keys()

    all_examples: dict[str, set[str]] = {}
    for lang in langs:
        assert set(EXAMPLES[lang]) == set(ROUTES), (lang, EXAMPLES[lang].keys())
        texts: list[str] = []
        for route in ROUTES:
            n = len(EXAMPLES[lang][route])
            assert n == 8, f"EXAMPLES[{lang}][{route}] has {n} items, expected 8"
            texts.extend(EXAMPLES[lang][route])
        assert len(set(texts)) == len(texts), f"duplicate example in {lang}"
        all_examples[lang] = set(texts)

    counts: dict[tuple[str, str | None], int] = {}
    seen: set[tuple[str, str]] = set()
    for lang, label, text in TESTS:
        assert lang in EXAMPLES, lang
        assert label is None or label in ROUTES, label
        assert text.strip(), (lang, label)
        assert (lang, text) not in seen, f"duplicate test: {text!r}"
        seen.add((lang, text))
        for ex_lang, ex_texts in all_examples.items():
            assert text not in ex_texts, f"test equals an example ({ex_lang}): {text!r}"
        counts[(lang, label)] = counts.get((lang, label), 0) + 1

    for lang in langs:
        for label in [*ROUTES, None]:
            expected = 30
            got = counts.get((lang, label), 0)
            assert got == expected, f"TESTS[{lang}][{label}] has {got} items, expected {expected}"
    assert len(TESTS_V1) == 240 and len(TESTS) == 450, (len(TESTS_V1), len(TESTS))

    # Held-out check: no test may share more than half of its (word / character) tokens with an example.
    worst = (0.0, "", "")
    for lang, _label, text in TESTS:
        t = _tokens(lang, text)
        for ex in all_examples[lang]:
            score = _jaccard(t, _tokens(lang, ex))
            assert score <= 0.5, f"test too close to an example ({score:.2f}): {text!r} ~ {ex!r}"
            if score > worst[0]:
                worst = (score, text, ex)

    print(f"routes: {', '.join(ROUTES)}")
    for lang in langs:
        per_route = ", ".join(f"{r}={counts[(lang, r)]}" for r in ROUTES)
        n_lang = sum(v for (lg, _), v in counts.items() if lg == lang)
        print(
            f"[{lang}] examples: {sum(len(v) for v in EXAMPLES[lang].values())} (8/route) | "
            f"tests: {n_lang} ({per_route}, off_topic={counts[(lang, None)]})"
        )
    print(f"total: {sum(len(e) for e in all_examples.values())} examples, {len(TESTS)} tests")
    print(f"max test/example token overlap (Jaccard): {worst[0]:.2f}  {worst[1]!r} ~ {worst[2]!r}")
    print("OK")
