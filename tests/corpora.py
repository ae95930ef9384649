"""Small corpora written for the tests (our own text), shared by the test modules that need them."""

# Six one-sentence animal documents: "mice" is in cat and fox, "night" in cat and owl.
ANIMALS = """id,title,text
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night."
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch."
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision."
bee,Bees,"Bees pollinate flowers and produce honey in their hives."
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits."
cow,Cows,"Cows graze on grass and give milk on dairy farms."
"""

# The same six with a `quality` metadata column (a tie-break field).
ANIMALS_WITH_QUALITY = """id,title,text,quality
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night.",3
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch.",5
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision.",4
bee,Bees,"Bees pollinate flowers and produce honey in their hives.",2
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits.",1
cow,Cows,"Cows graze on grass and give milk on dairy farms.",3
"""

# The same six with a `category` metadata column (query rules' filters and boosts).
ANIMALS_WITH_CATEGORY = """id,title,text,category
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night.",pet
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch.",pet
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision.",wild
bee,Bees,"Bees pollinate flowers and produce honey in their hives.",insect
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits.",wild
cow,Cows,"Cows graze on grass and give milk on dairy farms.",farm
"""
